package check

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A static pod's status reads as a kubelet writes it and Talos keeps it
// (StaticPodStatus: the pod's status as an unstructured map).
func TestStaticPodOf(t *testing.T) {
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}

	for _, tc := range []struct {
		name string
		cs   []corev1.ContainerStatus
		want string
	}{
		{"serving", []corev1.ContainerStatus{{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, "running, ready"},
		{"backing off", []corev1.ContainerStatus{{RestartCount: 4, LastTerminationState: ended,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}, "CrashLoopBackOff, 4 restarts, last exit code 1"},
		{"started again", []corev1.ContainerStatus{{RestartCount: 5, LastTerminationState: ended,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}, "running, not ready, 5 restarts, last exit code 1"},
		{"no container yet", nil, "not running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodStatus{ContainerStatuses: tc.cs})
			if err != nil {
				t.Fatal(err)
			}

			r := k8s.NewStaticPodStatus(k8s.NamespaceName, apiServerPodPrefix+"cp1")
			r.TypedSpec().PodStatus = m

			var st corev1.PodStatus
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.TypedSpec().PodStatus, &st); err != nil {
				t.Fatal(err)
			}

			got := staticPodOf(&st)
			if got.String() != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}
