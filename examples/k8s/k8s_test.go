// Package k8s holds the Kubernetes example of a sharded night
// (README.md); its test checks the manifests.
package k8s

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/scenarios"
)

// discovery answers kubectl's API discovery for what the manifests hold
// (core/v1 PersistentVolumeClaims, batch/v1 Jobs): `kubectl create
// --dry-run=client` maps each object's kind to its resource through the
// server before it prints the object, and no cluster is at hand here. It
// knows nothing else, so an object of a kind or version it does not list
// fails to map, as on a cluster without it.
func discovery(t *testing.T) *httptest.Server {
	t.Helper()

	resources := func(gv string, rs ...string) string {
		return fmt.Sprintf(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":%q,"resources":[%s]}`, gv, strings.Join(rs, ","))
	}

	resource := func(name, kind string) string {
		return fmt.Sprintf(`{"name":%q,"singularName":"","namespaced":true,"kind":%q,"verbs":["create","delete","get","list","patch","update","watch"]}`, name, kind)
	}

	docs := map[string]string{
		"/api":           `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`,
		"/apis":          `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"batch","versions":[{"groupVersion":"batch/v1","version":"v1"}],"preferredVersion":{"groupVersion":"batch/v1","version":"v1"}}]}`,
		"/api/v1":        resources("v1", resource("persistentvolumeclaims", "PersistentVolumeClaim")),
		"/apis/batch/v1": resources("batch/v1", resource("jobs", "Job")),
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)

			return
		}

		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, doc)
	}))
	t.Cleanup(srv.Close)

	return srv
}

// dryRun is what `kubectl create --dry-run=client -o yaml -f file` prints:
// the file's objects as kubectl read them, one document each. Validation
// against the server's OpenAPI schema is off (there is no server): the
// strict decoding into the API's Go types below does that part.
func dryRun(t *testing.T, kubectl, server, file string) [][]byte {
	t.Helper()

	cmd := exec.Command(kubectl, "create", "--dry-run=client", "--validate=false", "-o", "yaml", "-f", file,
		"--server", server, "--kubeconfig", os.DevNull, "--namespace", "talchaos")

	var stderr bytes.Buffer
	cmd.Stderr = &stderr

	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl create --dry-run=client -f %s: %v\n%s", file, err, stderr.String())
	}

	var docs [][]byte

	for _, d := range bytes.Split(out, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}

	return docs
}

// strict decodes a document kubectl printed into the API type, refusing a
// field the type does not have (a misspelt key kubectl passed through) or a
// value of the wrong type.
func strict[T any](t *testing.T, file string, doc []byte) *T {
	t.Helper()

	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		t.Fatalf("%s: %v\n%s", file, err, doc)
	}

	return &v
}

// The example's manifests are what kubectl accepts and prints back, objects
// of the real API types with no unknown field; the shards' Job is Indexed
// with N in its three places, runs nightly into a directory per index from
// the environment talchaos reads; the merge Job merges exactly those N
// directories; both mount the one claim; the shards run every built-in
// without Kubernetes (the image has no kube-apiserver).
func TestManifests(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the Kubernetes example is not checked")
	}

	srv := discovery(t)

	docs := dryRun(t, kubectl, srv.URL, "nightly-shards.yaml")
	if len(docs) != 2 {
		t.Fatalf("nightly-shards.yaml: kubectl printed %d objects, want the claim and the Job", len(docs))
	}

	claim := strict[corev1.PersistentVolumeClaim](t, "nightly-shards.yaml", docs[0])
	shards := strict[batchv1.Job](t, "nightly-shards.yaml", docs[1])
	merge := strict[batchv1.Job](t, "nightly-merge.yaml", only(t, dryRun(t, kubectl, srv.URL, "nightly-merge.yaml")))

	if claim.Kind != "PersistentVolumeClaim" || !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("the claim: %+v", claim)
	}

	spec := shards.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || spec.Completions == nil || spec.Parallelism == nil {
		t.Fatalf("the shards' Job is not Indexed with completions and parallelism: %+v", spec)
	}

	n := int(*spec.Completions)
	shardC, mergeC := container(t, shards), container(t, merge)

	if int(*spec.Parallelism) != n || envOf(shardC, shard.EnvShards) != fmt.Sprint(n) {
		t.Errorf("completions %d, parallelism %d and %s %q are not one N", n, *spec.Parallelism, shard.EnvShards, envOf(shardC, shard.EnvShards))
	}

	if shardC.Image != mergeC.Image || !slices.Equal(shardC.Command, []string{"/talchaos"}) || !slices.Equal(mergeC.Command, []string{"/talchaos"}) {
		t.Errorf("images %q and %q, commands %q and %q: want one talchaos image run as /talchaos", shardC.Image, mergeC.Image, shardC.Command, mergeC.Command)
	}

	if len(shardC.Args) == 0 || shardC.Args[0] != "nightly" || !slices.Contains(shardC.Args, "--out=/results/shard-$("+shard.EnvIndex+")") {
		t.Errorf("the shards run %q: want nightly into /results/shard-$(%s)", shardC.Args, shard.EnvIndex)
	}

	var dirs []string
	for i := range n {
		dirs = append(dirs, fmt.Sprintf("/results/shard-%d", i))
	}

	if want := append(append([]string{"merge"}, dirs...), "--out=/results/night"); !slices.Equal(mergeC.Args, want) {
		t.Errorf("the merge runs %q, want %q", mergeC.Args, want)
	}

	for _, j := range []*batchv1.Job{shards, merge} {
		if claimOf(j, "/results") != claim.Name {
			t.Errorf("%s does not mount claim %s at /results", j.Name, claim.Name)
		}

		if c := container(t, j).SecurityContext; c == nil || c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
			t.Errorf("%s: its root file system is not read-only", j.Name)
		}
	}

	checkScenarios(t, shardC.Args)
}

// checkScenarios: the shards name every built-in without Kubernetes or the
// operator's addresses (which need a user namespace in the pod), and
// nothing else.
func checkScenarios(t *testing.T, args []string) {
	t.Helper()

	var named []string

	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--scenario="); ok {
			named = append(named, strings.Split(v, ",")...)
		}
	}

	var want []string

	for _, name := range scenarios.Names() {
		sc, err := scenarios.Load(name)
		if err != nil {
			t.Fatal(err)
		}

		if !sc.Cluster.Kubernetes && sc.Cluster.Network == nil {
			want = append(want, name)
		}
	}

	slices.Sort(named)
	slices.Sort(want)

	if !slices.Equal(named, want) {
		t.Errorf("the shards run %v, want every built-in without Kubernetes or cluster.network: %v", named, want)
	}
}

func only(t *testing.T, docs [][]byte) []byte {
	t.Helper()

	if len(docs) != 1 {
		t.Fatalf("kubectl printed %d objects, want 1", len(docs))
	}

	return docs[0]
}

func container(t *testing.T, j *batchv1.Job) corev1.Container {
	t.Helper()

	if cs := j.Spec.Template.Spec.Containers; len(cs) == 1 {
		return cs[0]
	}

	t.Fatalf("%s: want one container", j.Name)

	return corev1.Container{}
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}

	return ""
}

// claimOf is the claim a Job's container mounts at path ("" for none).
func claimOf(j *batchv1.Job, path string) string {
	for _, m := range j.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}

		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
	}

	return ""
}
