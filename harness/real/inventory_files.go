package real

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"unicode"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/harness/strictyaml"
)

// maxSecretBytes bounds a token secret file: a Proxmox token secret is a UUID.
const maxSecretBytes = 64 << 10

// checkFiles checks what a run needs from the disk and the environment, before
// anything starts: the talosconfig loads and has a current context, every
// node's machine config loads with the machinery, the Proxmox token secret is
// there. Each problem points at the field that names the file. No message
// quotes what is in those files: they hold keys.
func (inv *Inventory) checkFiles() error {
	var errs []*strictyaml.Error

	if err := inv.checkTalosconfig(); err != nil {
		errs = append(errs, err)
	}

	loaded := map[string]string{} // resolved path -> problem ("" when it loads)

	for i, n := range inv.Nodes {
		field := fmt.Sprintf("nodes[%d].config", i)

		path := inv.path(n.Config)

		problem, seen := loaded[path]
		if !seen {
			problem = checkMachineConfig(path, n.Config)
			loaded[path] = problem
		}

		if problem != "" {
			errs = append(errs, inv.errorf(field, "%s", problem))
		}
	}

	if err := inv.checkProxmoxSecret(); err != nil {
		errs = append(errs, err)
	}

	return strictyaml.Collect(errs)
}

func (inv *Inventory) checkTalosconfig() *strictyaml.Error {
	data, err := readFile(inv.path(inv.Talosconfig), strictyaml.MaxFileBytes)
	if err != nil {
		return inv.errorf("talosconfig", "%s", describeFileError(err, inv.Talosconfig))
	}

	// clientconfig.Open would create a missing file; reading it here leaves the
	// disk as it is.
	cfg, err := clientconfig.FromBytes(data)
	if err != nil {
		return inv.errorf("talosconfig", "%s is not a talosconfig: %s", showPath(inv.Talosconfig), redact(err))
	}

	switch {
	case cfg.Context == "":
		return inv.errorf("talosconfig", "%s has no current context (its context field is empty)", showPath(inv.Talosconfig))
	case cfg.Contexts[cfg.Context] == nil:
		return inv.errorf("talosconfig", "%s: its current context %s is not among its contexts", showPath(inv.Talosconfig), quote(cfg.Context))
	}

	inv.talosconfig = cfg

	return nil
}

// checkMachineConfig loads a machine config with the machinery, as a node
// would; it returns what is wrong, or "". written is the path as the inventory
// writes it.
func checkMachineConfig(path, written string) string {
	data, err := readFile(path, strictyaml.MaxFileBytes)
	if err != nil {
		return describeFileError(err, written)
	}

	if _, err := configloader.NewFromBytes(data); err != nil {
		return fmt.Sprintf("%s is not a Talos machine config: %s", showPath(written), redact(err))
	}

	return ""
}

func (inv *Inventory) checkProxmoxSecret() *strictyaml.Error {
	p := inv.Proxmox
	if p == nil {
		return nil
	}

	if f := p.TokenSecretFile; f != "" {
		data, err := readFile(inv.path(f), maxSecretBytes)

		switch {
		case err != nil && tokenSecretShape.MatchString(f):
			return inv.errorf("proxmox.tokenSecretFile", "cannot be read, and looks like the token's secret itself (not shown), not the path of the file that holds it")
		case err != nil:
			return inv.errorf("proxmox.tokenSecretFile", "%s", describeFileError(err, f))
		}

		if strings.TrimSpace(string(data)) == "" {
			return inv.errorf("proxmox.tokenSecretFile", "%s is empty", showPath(f))
		}

		return nil
	}

	if v, ok := os.LookupEnv(p.TokenSecretEnv); !ok || strings.TrimSpace(v) == "" {
		return inv.errorf("proxmox.tokenSecretEnv", "environment variable %s is not set", p.TokenSecretEnv)
	}

	return nil
}

// describeFileError says why a file could not be read, naming it as the
// inventory writes it ("open ./talosconfig: no such file or directory").
func describeFileError(err error, written string) string {
	written = showPath(written)

	var (
		pe *fs.PathError
		nr *inputfile.NotRegularError
		tl *inputfile.TooLargeError
	)

	switch {
	case errors.As(err, &nr):
		return written + " " + nr.Problem()
	case errors.As(err, &tl):
		return written + " " + tl.Problem()
	case errors.As(err, &pe):
		return fmt.Sprintf("%s %s: %v", pe.Op, written, pe.Err)
	}

	return fmt.Sprintf("read %s: %v", written, err)
}

// showPath prints a path as the inventory writes it, quoted when it holds
// anything but printable non-space characters, so that a message stays one line.
func showPath(p string) string {
	if len(p) > 256 {
		return quote(p)
	}

	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return quote(p)
		}
	}

	return p
}

var (
	// quotedRE matches what YAML libraries quote from the input in their
	// messages: `value...` and "value".
	quotedRE = regexp.MustCompile("`[^`]*`|\"[^\"]*\"")
	// yamlLineRE is a line of a multi-line YAML error that names a line of the
	// input ("line 4: cannot construct !!seq into string"); other continuation
	// lines (the machinery's "unknown keys found" lists) are the input itself.
	yamlLineRE = regexp.MustCompile(`^line \d+: `)
	spacesRE   = regexp.MustCompile(`\s+`)
)

// redact turns a config loader's error into one line that keeps its structure
// (what is wrong, on which line) and drops every piece of the file it quotes:
// those files hold keys and tokens.
func redact(err error) string {
	lines := strings.Split(err.Error(), "\n")

	kept := []string{lines[0]}

	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); yamlLineRE.MatchString(l) {
			kept = append(kept, l)
		}
	}

	msg := quotedRE.ReplaceAllString(strings.Join(kept, " "), "(...)")
	// A quote left open would quote the rest of the line: cut there.
	if i := strings.IndexAny(msg, "`\""); i >= 0 {
		msg = msg[:i] + "(...)"
	}

	msg = strings.TrimSuffix(strings.TrimSpace(spacesRE.ReplaceAllString(msg, " ")), ":")
	if msg == "" {
		return "unreadable"
	}

	return msg
}
