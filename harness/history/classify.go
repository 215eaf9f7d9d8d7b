package history

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Failure classifies a failed call by what it says about whether the node
// got the call and acted on it. This is the one place that reads the error
// texts of gRPC, TLS and the OS; everything else reads the class.
type Failure string

// Failure classes.
const (
	// FailureNone: the node answered with an error of its own (see the code).
	FailureNone Failure = ""
	// FailureRefused: refused before it had any effect (an injected api-fail).
	FailureRefused Failure = "refused-before-effect"
	// FailureNoConnection: the call never reached the node (connection
	// refused, a dial or TLS handshake that failed).
	FailureNoConnection Failure = "no-connection"
	// FailureCertificateRequired: a client without a certificate talked to a
	// node that requires one (it has left maintenance): "tls: certificate required".
	FailureCertificateRequired Failure = "certificate-required"
	// FailureUnknownAuthority: the node's certificate is not signed by the
	// client's CA (a talosconfig of other secrets, or a node still in
	// maintenance): "x509: certificate signed by unknown authority".
	FailureUnknownAuthority Failure = "unknown-authority"
	// FailureCertificateTime: a certificate is outside its validity by the
	// clock of the side that checked it (a clock that is off, talos #6462):
	// "x509: certificate has expired or is not yet valid", or, when the node
	// refused the client's, the alert "tls: expired certificate".
	FailureCertificateTime Failure = "certificate-time"
	// FailureNoAnswer: the call went out and no answer came back (deadline,
	// reset, EOF): the node may have acted.
	FailureNoAnswer Failure = "no-answer"
)

// MayHaveActed reports whether a call that failed this way may have taken
// effect on the node.
func (f Failure) MayHaveActed() bool { return f == FailureNoAnswer }

// InjectedReason is the ErrorInfo reason talchaos's API faults attach to a
// refusal they inject, so that it is recognised by type, not by text.
const InjectedReason = "TALCHAOS_INJECTED_REFUSAL"

// InjectedDomain is the ErrorInfo domain of InjectedReason.
const InjectedDomain = "talchaos"

// CodeOf is a call's gRPC code name and message ("OK", "" when err is nil).
func CodeOf(err error) (string, string) {
	if err == nil {
		return codes.OK.String(), ""
	}

	s := status.Convert(err)

	return s.Code().String(), s.Message()
}

// Classify says what a call's error tells of whether the node got the call.
func Classify(err error) Failure {
	if err == nil {
		return FailureNone
	}

	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return FailureNoAnswer
	}

	s := status.Convert(err)

	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == InjectedReason && info.GetDomain() == InjectedDomain {
			return FailureRefused
		}
	}

	msg := s.Message()

	switch {
	case strings.Contains(msg, "tls: certificate required"):
		return FailureCertificateRequired
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return FailureUnknownAuthority
	case strings.Contains(msg, certificateTimeText) || strings.Contains(msg, "tls: expired certificate"):
		return FailureCertificateTime
	}

	switch s.Code() {
	case codes.DeadlineExceeded, codes.Canceled:
		// The deadline ran out while gRPC was still picking a connection
		// (grpc-go picker_wrapper.go: "... while waiting for connections to
		// become ready", or "latest balancer error: ..."): the call was never
		// sent. Through an address no host answers for, the dial's own
		// timeout and the call's race.
		if strings.Contains(msg, "while waiting for connections to become ready") || strings.HasPrefix(msg, "latest balancer error: ") {
			return FailureNoConnection
		}

		return FailureNoAnswer
	case codes.Unavailable:
		// gRPC prefixes failures to set up the connection with "connection
		// error": the call was never sent.
		if strings.Contains(msg, "connection error") || strings.Contains(msg, "connection refused") {
			return FailureNoConnection
		}

		return FailureNoAnswer
	}

	return FailureNone
}

// portRE matches ephemeral ports in connection errors ("127.0.0.1:44852->").
var portRE = regexp.MustCompile(`:\d+->`)

// sameText compares two error texts, whatever ephemeral port each connection had.
func sameText(a, b string) bool {
	return a == b || portRE.ReplaceAllString(a, ":*->") == portRE.ReplaceAllString(b, ":*->")
}

// Same reports whether two observations of a node show the same state (error
// texts compared without their ephemeral ports, raft indexes not compared).
func Same(a, b *NodeObservation) bool {
	if a.Name != b.Name || a.Address != b.Address || a.Role != b.Role || a.Mode != b.Mode || a.Stage != b.Stage || a.Version != b.Version || a.BootID != b.BootID ||
		!sameText(a.APIError, b.APIError) || !sameText(a.MembersErr, b.MembersErr) || !sameText(a.StatusErr, b.StatusErr) {
		return false
	}

	if !sameService(a.Etcd, b.Etcd) || !sameService(a.Kubelet, b.Kubelet) || !sameAPIServer(a.APIServer, b.APIServer) || !sameStaticPod(a.APIServerPod, b.APIServerPod) {
		return false
	}

	// Raft indexes move with every write; Recorder.Observe samples them.
	if (a.Status == nil) != (b.Status == nil) ||
		(a.Status != nil && (a.Status.MemberID != b.Status.MemberID || a.Status.Leader != b.Status.Leader || a.Status.IsLearner != b.Status.IsLearner)) {
		return false
	}

	if len(a.Members) != len(b.Members) {
		return false
	}

	for i := range a.Members {
		x, y := a.Members[i], b.Members[i]
		if x.ID != y.ID || x.Hostname != y.Hostname || x.IsLearner != y.IsLearner || strings.Join(x.PeerURLs, ",") != strings.Join(y.PeerURLs, ",") {
			return false
		}
	}

	return true
}

func sameAPIServer(a, b *APIServer) bool {
	if a == nil || b == nil {
		return a == b
	}

	return a.Ready == b.Ready && sameText(a.Error, b.Error) && (a.Endpoints == nil) == (b.Endpoints == nil) &&
		strings.Join(a.Endpoints, ",") == strings.Join(b.Endpoints, ",") &&
		(a.Nodes == nil) == (b.Nodes == nil) && slices.Equal(a.Nodes, b.Nodes)
}

func sameStaticPod(a, b *StaticPod) bool {
	if a == nil || b == nil {
		return a == b
	}

	return a.Running == b.Running && a.Ready == b.Ready && a.Restarts == b.Restarts && a.Waiting == b.Waiting &&
		(a.LastExit == nil) == (b.LastExit == nil) && (a.LastExit == nil || *a.LastExit == *b.LastExit)
}

func sameService(a, b *Service) bool {
	if a == nil || b == nil {
		return a == b
	}

	return a.State == b.State && a.Message == b.Message && a.Healthy == b.Healthy && a.HealthUnknown == b.HealthUnknown &&
		a.HealthMessage == b.HealthMessage && a.Restarts == b.Restarts && a.Started.Equal(b.Started)
}

// certificateTimeText is crypto/x509's CertificateInvalidError for a
// certificate outside its validity (Reason Expired).
const certificateTimeText = "x509: certificate has expired or is not yet valid: "

// certificateTimeRE reads its detail: "current time T is before|after B"
// (T and B in RFC 3339).
var certificateTimeRE = regexp.MustCompile(regexp.QuoteMeta(certificateTimeText) + `current time (\S+) is (before|after) (\S+?)"?$`)

// CertificateTime reads an error text of a certificate outside its
// validity: the checker's time, the bound it is before or after (the
// certificate's NotBefore or NotAfter), and which.
func CertificateTime(text string) (now, bound time.Time, before, ok bool) {
	m := certificateTimeRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, time.Time{}, false, false
	}

	now, err1 := time.Parse(time.RFC3339, m[1])
	bound, err2 := time.Parse(time.RFC3339, m[3])

	return now, bound, m[2] == "before", err1 == nil && err2 == nil
}

// CertificateNameText begins crypto/x509's HostnameError for an IP address
// a certificate does not name: "x509: certificate is valid for A, B, not
// C" (the certificate's IP addresses, then the one dialled).
const CertificateNameText = "x509: certificate is valid for "

// DialText begins Go's error for a TCP connection that could not be made
// (net.OpError of a dial): "dial tcp 10.150.0.12:2380: connect: no route
// to host".
const DialText = "dial tcp "

// certificateNameRE reads it: the addresses named, the address dialled.
var certificateNameRE = regexp.MustCompile(regexp.QuoteMeta(CertificateNameText) + `(.+?), not ([0-9A-Fa-f.:]+)`)

// CertificateName reads an error text of a certificate that does not name
// the address dialled: the addresses it names, and the address.
func CertificateName(text string) (named []string, dialled string, ok bool) {
	m := certificateNameRE.FindStringSubmatch(text)
	if m == nil {
		return nil, "", false
	}

	return strings.Split(m[1], ", "), m[2], true
}
