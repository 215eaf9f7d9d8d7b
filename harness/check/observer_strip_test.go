package check

import "testing"

func TestStripTimestamp(t *testing.T) {
	for in, want := range map[string]string{
		"2026/11/22 06:41:19 retrying error: timeout": "retrying error: timeout",
		"\ttimeout":                   "\ttimeout",
		"short":                       "short",
		"2026/13/99 xx:xx:xx message": "2026/13/99 xx:xx:xx message",
		// metal: go-kmsg's prefix, no date
		"[talos] retrying error: timeout": "retrying error: timeout",
		// container mode: the prefix, then Go's date
		"[talos] 2026/11/22 06:41:19 successfully promoted etcd member": "successfully promoted etcd member",
	} {
		if got := stripTimestamp(in); got != want {
			t.Errorf("stripTimestamp(%q) = %q, want %q", in, got, want)
		}
	}
}
