package container

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/talchaos/talchaos/harness/scratch"
)

// Reap removes the containers, networks and images of talchaos runs whose
// process is gone (killed before it could clean up), found by their labels:
// on this host only, and never a live run's (parallel runs share the engine).
// It returns how many objects it removed.
func Reap(ctx context.Context, docker *testcontainers.DockerClient) (int, error) {
	host, _ := os.Hostname() //nolint:errcheck // compared with the labels written the same way

	runs := map[string]bool{}

	consider := func(labels map[string]string) {
		run, ok := labels[LabelRun]
		if !ok || labels[LabelHost] != host {
			return
		}

		if pid, err := strconv.Atoi(labels[LabelPID]); err == nil && !alive(pid) {
			runs[run] = true
		}
	}

	filter := client.Filters{}.Add("label", LabelRun)

	ctrs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return 0, err
	}

	for _, c := range ctrs.Items {
		consider(c.Labels)
	}

	nets, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		return 0, err
	}

	for _, n := range nets.Items {
		consider(n.Labels)
	}

	imgs, err := docker.ImageList(ctx, client.ImageListOptions{Filters: filter})
	if err != nil {
		return 0, err
	}

	for _, i := range imgs.Items {
		consider(i.Labels)
	}

	removed := 0

	var errs []error

	for run := range runs {
		n, err := removeRunCount(ctx, docker, run)
		removed += n

		errs = append(errs, err)
	}

	return removed, errors.Join(errs...)
}

// alive reports whether a process with this pid runs (a zombie does not:
// its owner's watchdog reaps as soon as it has exited).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)

	return (err == nil || errors.Is(err, syscall.EPERM)) && scratch.Alive(pid)
}

// ReapDead is Reap with a client of its own, for a process that has none (a
// run's watchdog, after the run was killed); it does nothing where no Docker
// engine is configured (no $DOCKER_HOST, no /var/run/docker.sock).
func ReapDead(ctx context.Context) (int, error) {
	if _, err := os.Stat("/var/run/docker.sock"); err != nil && os.Getenv("DOCKER_HOST") == "" {
		return 0, nil
	}

	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return 0, err
	}
	defer docker.Close() //nolint:errcheck

	return Reap(ctx, docker)
}

// removeRun removes every container, network and image labelled with the run.
func removeRun(ctx context.Context, docker *testcontainers.DockerClient, run string) error {
	_, err := removeRunCount(ctx, docker, run)

	return err
}

func removeRunCount(ctx context.Context, docker *testcontainers.DockerClient, run string) (int, error) {
	filter := client.Filters{}.Add("label", LabelRun+"="+run)
	removed := 0

	var errs []error

	ctrs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	errs = append(errs, err)

	if err == nil {
		for _, c := range ctrs.Items {
			_, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err == nil {
				removed++
			}

			errs = append(errs, ignoreGone(err))
		}
	}

	nets, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	errs = append(errs, err)

	if err == nil {
		for _, n := range nets.Items {
			_, err := docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			if err == nil {
				removed++
			}

			errs = append(errs, ignoreGone(err))
		}
	}

	imgs, err := docker.ImageList(ctx, client.ImageListOptions{Filters: filter})
	errs = append(errs, err)

	if err == nil {
		for _, i := range imgs.Items {
			_, err := docker.ImageRemove(ctx, i.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			if err == nil {
				removed++
			}

			errs = append(errs, ignoreGone(err))
		}
	}

	return removed, errors.Join(errs...)
}

// ignoreGone drops "no such object" and "removal … already in progress":
// another reaper of the same dead run (its watchdog, another run starting),
// or the engine finishing a removal the killed run had asked for.
func ignoreGone(err error) error {
	if err == nil || cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "No such") ||
		(cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")) {
		return nil
	}

	return err
}
