package sim

import (
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	"github.com/talchaos/talchaos/harness/secretbundle"
)

// NewSecretsBundle is secretbundle.New: a bundle with an ECDSA service-account key.
func NewSecretsBundle(contract *config.VersionContract) (*secrets.Bundle, error) {
	return secretbundle.New(contract)
}
