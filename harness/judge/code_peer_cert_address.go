package judge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "peer-cert-address-missing",
	Doc: "a member's etcd certificate does not name the address its peers dial it at " +
		"(x509: certificate is valid for A, not B): it was issued before that address came up",
	Diagnose: peerCertAddressMissing,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get addresses   # the address is up now", r.Addr),
			fmt.Sprintf("openssl s_client -connect %s:2380 </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName   # what the peer certificate names",
				bracketed(dialledOf(r.Diagnosis))),
			fmt.Sprintf("talosctl -n %s reboot   # the certificates are issued again at boot, from the addresses up then; "+
				"Talos v1.2.0 and later issue them again as the addresses change", r.Addr),
		}
	},
})

// peerCertAddressMissing: a member's etcd logged that a peer's certificate
// does not name the address it dialled the peer at (crypto/x509's
// HostnameError: a joining member's "failed to get cluster response", the
// leader's "failed to reach the peer URL", rafthttp's "prober detected
// unhealthy status"). The address is the peer's (one of its
// addresses the observer knows); a certificate issued from the node's
// addresses before that one came up does not name it (talos #6110, on Talos
// before v1.2.0, whose EtcdController did not follow the node's addresses).
func peerCertAddressMissing(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	seen := map[string]bool{}

	for _, o := range ev.Final.Ordered() {
		for _, l := range ev.EtcdLogs(o.Name) {
			named, dialled, ok := history.CertificateName(l.Text)
			if !ok {
				continue
			}

			owner := ownerOf(ev.Final, dialled)
			if owner == "" || seen[owner+" "+dialled] {
				continue
			}

			seen[owner+" "+dialled] = true

			out = append(out, diag("peer-cert-address-missing", owner,
				fmt.Sprintf("%s's etcd certificate names %s but not %s, the address its peers dial it at: "+
					"it was issued before %s came up on %s, and every peer's TLS to it there fails",
					owner, strings.Join(named, ", "), dialled, dialled, owner),
				o.Name+" etcd: "+etcdSummary(l.Text), l.At))
		}
	}

	return out
}

// ownerOf is the node one of whose addresses ip is, or "".
func ownerOf(final *history.Observation, ip string) string {
	for _, n := range final.Ordered() {
		if n.Address == ip || slices.Contains(n.Addresses, ip) {
			return n.Name
		}
	}

	return ""
}

// dialledOf is the address a diagnosis says the certificate lacks.
func dialledOf(d result.Diagnosis) string {
	if _, dialled, ok := history.CertificateName(d.Evidence); ok {
		return dialled
	}

	return "NODE-ADDRESS"
}

// bracketed writes an IPv6 address for host:port.
func bracketed(ip string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]"
	}

	return ip
}
