package result

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/siderolabs/crypto/x509"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v3"
)

// redactionMarker is what the machinery is asked to put in place of every
// secret; where it shows up in the redacted config, the original holds a secret.
const redactionMarker = "talchaos-redaction-marker-4e1f0b9a"

// MachineConfigSecrets lists every secret of a Talos machine config, as Talos
// itself defines them: the values its own redaction (config.Provider's
// RedactSecrets, which knows every document kind: v1alpha1's tokens, cluster
// secret, encryption secrets, CA and service-account keys, WireGuard keys,
// registry credentials, disk encryption keys...) replaces, and the secrets
// bundle the machinery reads out of the config (secrets.NewBundleFromConfig).
// Hand Add the result; it expands keys into their PEM and base64 forms.
//
// A config the machinery cannot load still gives what its YAML holds under
// the usual secret field names, with an error saying it could not be loaded.
func MachineConfigSecrets(data []byte) ([]string, error) {
	cfg, err := configloader.NewFromBytes(data)
	if err != nil {
		return yamlSecrets(data), fmt.Errorf("machine config: %w", err)
	}

	out := BundleSecrets(bundleOf(cfg))

	opts := []encoder.Option{encoder.WithComments(encoder.CommentsDisabled)}

	orig, err := cfg.EncodeBytes(opts...)
	if err != nil {
		return out, fmt.Errorf("machine config: %w", err)
	}

	redacted, err := cfg.RedactSecrets(redactionMarker).EncodeBytes(opts...)
	if err != nil {
		return out, fmt.Errorf("machine config: %w", err)
	}

	diff, err := redactedValues(orig, redacted)

	return append(out, diff...), err
}

// bundleOf is the secrets bundle the machinery reads out of a config, nil
// for a config without a v1alpha1 document (NewBundleFromConfig expects one).
func bundleOf(cfg config.Provider) (b *secrets.Bundle) {
	if cfg.RawV1Alpha1() == nil {
		return nil
	}

	// The redaction below still sees every secret if some odd shape trips it.
	defer func() {
		if recover() != nil {
			b = nil
		}
	}()

	return secrets.NewBundleFromConfig(secrets.NewFixedClock(time.Time{}), cfg)
}

// redactedValues walks the documents of a config and of its redacted copy side
// by side and returns the original values where the copy has the marker (as
// a string, or base64-encoded for byte fields).
func redactedValues(orig, redacted []byte) ([]string, error) {
	origDocs, err := yamlDocuments(orig)
	if err != nil {
		return nil, err
	}

	redDocs, err := yamlDocuments(redacted)
	if err != nil {
		return nil, err
	}

	if len(origDocs) != len(redDocs) {
		return nil, errors.New("machine config: redacted copy has another number of documents")
	}

	var out []string

	markers := []string{redactionMarker, base64.StdEncoding.EncodeToString([]byte(redactionMarker))}

	var walk func(o, r *yaml.Node)

	walk = func(o, r *yaml.Node) {
		if o == nil || r == nil || o.Kind != r.Kind {
			return
		}

		switch o.Kind {
		case yaml.ScalarNode:
			if o.Value != r.Value && (r.Value == markers[0] || r.Value == markers[1]) {
				out = append(out, o.Value)
			}
		case yaml.MappingNode:
			values := map[string]*yaml.Node{}
			for i := 0; i+1 < len(r.Content); i += 2 {
				values[r.Content[i].Value] = r.Content[i+1]
			}

			for i := 0; i+1 < len(o.Content); i += 2 {
				walk(o.Content[i+1], values[o.Content[i].Value])
			}
		case yaml.DocumentNode, yaml.SequenceNode:
			if len(o.Content) == len(r.Content) {
				for i := range o.Content {
					walk(o.Content[i], r.Content[i])
				}
			}
		default:
		}
	}

	for i := range origDocs {
		walk(origDocs[i], redDocs[i])
	}

	return out, nil
}

func yamlDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))

	var docs []*yaml.Node

	for {
		var doc yaml.Node

		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}

		if err != nil {
			return nil, err
		}

		docs = append(docs, &doc)
	}
}

// secretFields are the field names Talos documents keep secrets under; used
// only for a config the machinery cannot load.
var secretFields = map[string]bool{
	"token": true, "secret": true, "key": true, "privateKey": true, "password": true, "auth": true,
	"identityToken": true, "keyData": true, "apiToken": true, "secretboxEncryptionSecret": true, "aescbcEncryptionSecret": true,
}

// yamlSecrets is every scalar under a secret field name, in whatever YAML
// documents data holds.
func yamlSecrets(data []byte) []string {
	var out []string

	var walk func(n *yaml.Node)

	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if v := n.Content[i+1]; v.Kind == yaml.ScalarNode && secretFields[n.Content[i].Value] {
					out = append(out, v.Value)
				}
			}
		}

		for _, c := range n.Content {
			walk(c)
		}
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))

	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return out
		}

		walk(&doc)
	}
}

// BundleSecrets lists every secret of a Talos secrets bundle: the CA and
// service-account keys (PEM), the bootstrap and trustd tokens, the cluster ID
// and secret and the encryption secrets. Certificates are public and left out.
func BundleSecrets(b *secrets.Bundle) []string {
	if b == nil {
		return nil
	}

	var out []string

	if c := b.Certs; c != nil {
		for _, pair := range []*x509.PEMEncodedCertificateAndKey{c.Etcd, c.K8s, c.K8sAggregator, c.OS} {
			if pair != nil {
				out = append(out, string(pair.Key))
			}
		}

		if c.K8sServiceAccount != nil {
			out = append(out, string(c.K8sServiceAccount.Key))
		}
	}

	if s := b.Secrets; s != nil {
		out = append(out, s.BootstrapToken, s.AESCBCEncryptionSecret, s.SecretboxEncryptionSecret)
	}

	if t := b.TrustdInfo; t != nil {
		out = append(out, t.Token)
	}

	if c := b.Cluster; c != nil {
		out = append(out, c.ID, c.Secret)
	}

	return out
}

// TalosconfigSecrets lists the credentials of every context of a talosconfig:
// client key and certificate, CA, basic-auth password (base64 as the file has
// them; Add also registers their decoded PEM).
func TalosconfigSecrets(cfg *clientconfig.Config) []string {
	if cfg == nil {
		return nil
	}

	var out []string

	for _, c := range cfg.Contexts {
		if c == nil {
			continue
		}

		out = append(out, c.Key, c.Crt, c.CA)

		if c.Auth.Basic != nil {
			out = append(out, c.Auth.Basic.Password)
		}
	}

	return out
}
