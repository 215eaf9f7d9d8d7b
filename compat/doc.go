// Package compat is the compatibility suite proving that real Talos clients
// work against `talchaos up`: the real talosctl built from
// github.com/siderolabs/talos (the version pinned in this module's go.mod) and
// Talos's own pre-boot health checks (cmd/precheck).
//
// It is a separate module so that the talos module and its large dependency
// graph never enter the talchaos module. It does not import talchaos: it
// builds /work/main/cmd/talchaos (the parent directory) and drives the binary.
//
// Run it with `make compat` from the repository root, or `go test ./...` here.
package compat
