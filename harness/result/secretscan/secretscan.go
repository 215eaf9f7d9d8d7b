// Package secretscan is for tests that prove talchaos prints and stores no
// secret: it lists every secret of a cluster's secrets bundle and talosconfig,
// in each form it could be printed in, independently of the scrubber's own
// derivation, and finds them in text.
package secretscan

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
)

// Secret is one secret value in one form, with a name that says which it is.
type Secret struct {
	Name  string
	Value string
}

// Values lists every string of the bundle but the certificates (public), and
// every talosconfig's client key: each as the bundle or file holds it (keys in
// base64, as configs carry them) and, for keys, decoded (the PEM text and each
// of its base64 body lines, as a command printing the key decoded gives them).
func Values(b *secrets.Bundle, talosconfigs ...*clientconfig.Config) ([]Secret, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}

	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil, err
	}

	var out []Secret

	var walk func(path string, v any)

	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if k != "Crt" {
					walk(path+"."+k, c)
				}
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		case string:
			out = append(out, forms(path, v)...)
		}
	}

	walk("bundle", tree)

	for i, cfg := range talosconfigs {
		for name, c := range cfg.Contexts {
			out = append(out, forms(fmt.Sprintf("talosconfig[%d].%s.key", i, name), c.Key)...)
		}
	}

	var kept []Secret

	for _, s := range out {
		if len(s.Value) >= 8 {
			kept = append(kept, s)
		}
	}

	sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })

	return kept, nil
}

func forms(name, v string) []Secret {
	out := []Secret{{name, v}}

	pem, err := base64.StdEncoding.DecodeString(v)
	if err != nil || !strings.Contains(string(pem), "-----BEGIN ") {
		return out
	}

	out = append(out, Secret{name + " (PEM)", strings.TrimSpace(string(pem))})

	for i, line := range strings.Split(string(pem), "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			out = append(out, Secret{fmt.Sprintf("%s (PEM line %d)", name, i+1), line})
		}
	}

	return out
}

// Find returns one line per secret found in text, naming it and where
// (without printing the secret).
func Find(where, text string, secrets []Secret) []string {
	var hits []string

	for _, s := range secrets {
		if strings.Contains(text, s.Value) {
			hits = append(hits, fmt.Sprintf("%s contains %s (%.6s...)", where, s.Name, s.Value))
		}
	}

	return hits
}

// Files reads every regular file in the directories, by path.
func Files(dirs ...string) (map[string]string, error) {
	out := map[string]string{}

	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}

		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}

			data, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				return nil, err
			}

			out[filepath.Join(d, e.Name())] = string(data)
		}
	}

	return out, nil
}
