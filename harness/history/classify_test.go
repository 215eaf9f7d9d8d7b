package history

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What a failed call's error says of whether the node got it, for the
// errors gRPC and Talos give (grpc-go's texts: picker_wrapper.go for a call
// that never got a connection, transport errors for one that had it).
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Failure
	}{
		{"ok", nil, FailureNone},
		{"dial failed", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 10.119.0.10:50000: connect: no route to host"`), FailureNoConnection},
		{"refused", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:50000: connect: connection refused"`), FailureNoConnection},
		{"deadline while picking a connection", status.Error(codes.DeadlineExceeded, "context deadline exceeded while waiting for connections to become ready"), FailureNoConnection},
		{"deadline with the balancer's last error", status.Error(codes.DeadlineExceeded, `latest balancer error: connection error: desc = "transport: Error while dialing: dial tcp 10.119.0.10:50000: i/o timeout"`), FailureNoConnection},
		{"deadline on a sent call", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), FailureNoAnswer},
		{"the context's own deadline", context.DeadlineExceeded, FailureNoAnswer},
		{"connection lost after sending", status.Error(codes.Unavailable, "error reading from server: EOF"), FailureNoAnswer},
		{"certificate required", status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: certificate required"`), FailureCertificateRequired},
		{"an answer", status.Error(codes.AlreadyExists, "etcd data directory is not empty"), FailureNone},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
