package chaos

import (
	"context"
	"errors"

	"github.com/distribution/reference"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// ImageMissing takes an image out of the registry the nodes pull from: a tag
// never published, a mistyped Image Factory schematic, a mirror that lacks
// it. Talos's Upgrade pulls the installer image before it does anything
// else (install.PullAndValidateInstallerImage) and refuses with containerd's
// "not found" after one more try: the node keeps its version.
type ImageMissing struct {
	Image string `yaml:"image" doc:"the image the registry does not have, as an upgrade names it; empty: every image"`
}

func (ImageMissing) Kind() string      { return "image-missing" }
func (ImageMissing) Destructive() bool { return false }
func (ImageMissing) Doc() string {
	return "the registry the nodes pull from does not have an image: an upgrade to it is refused (\"failed to pull image …: not found\") and the node keeps its version"
}

func (ImageMissing) Example() string {
	return "{kind: image-missing, image: ghcr.io/siderolabs/installer:v1.12.7, at: 0s}"
}

func (ImageMissing) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.RegistryImages}
}

func (k ImageMissing) Validate(c *scenario.FaultCheck) {
	if k.Image == "" {
		return
	}

	if _, err := reference.ParseDockerRef(k.Image); err != nil {
		c.Errorf("image", "%q is not an image reference: %v", k.Image, err)
	}
}

// Inject hides the image as the nodes name it when they pull: normalized
// (docker.io/library/… for a short name).
func (k ImageMissing) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	r, ok := env.Cluster.(target.Registry)
	if !ok {
		return nil, errors.New("the cluster cannot act on the registry its nodes pull from")
	}

	image := k.Image

	if image != "" {
		named, err := reference.ParseDockerRef(image)
		if err != nil {
			return nil, err
		}

		image = named.String()
	}

	return r.HideImage(ctx, image)
}
