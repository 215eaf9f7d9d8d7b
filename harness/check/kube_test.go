package check

import (
	"errors"
	"testing"
)

// What /readyz says when it fails: its failed checks, the first few only;
// the request's error when the body says nothing.
func TestReadyzFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		err  error
		want string
	}{
		{
			name: "etcd not serving",
			body: "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\nreadyz check failed\n",
			err:  errors.New("the server is currently unable to handle the request"),
			want: "readyz: etcd failed: reason withheld",
		},
		{
			name: "many failed checks",
			body: "[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\n[-]informer-sync failed: reason withheld\n" +
				"[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n[-]autoregister-completion failed: reason withheld\n",
			err:  errors.New("500"),
			want: "readyz: etcd failed: reason withheld; etcd-readiness failed: reason withheld; informer-sync failed: reason withheld; and 2 more",
		},
		{
			name: "no answer",
			err:  errors.New(`Get "https://198.18.9.3:6443/readyz": dial tcp 198.18.9.3:6443: connect: connection refused`),
			want: `Get "https://198.18.9.3:6443/readyz": dial tcp 198.18.9.3:6443: connect: connection refused`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readyzFailure([]byte(tc.body), tc.err); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
