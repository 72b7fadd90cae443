package hypertopology

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

func TestReservationsPlaced(t *testing.T) {
	r := newReservations()
	k := gang.Key{Namespace: "ns", Name: "g"}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	r.Assume(k, pending, "n2")
	r.Assume(k, bound, "n1")
	got := r.Placed(k, []*corev1.Pod{bound, pending})
	if len(got) != 2 || got["b"] != "n1" || got["p"] != "n2" {
		t.Fatalf("Placed = %v", got)
	}
	r.Forget(k, "p")
	r.Forget(k, "b")
	if got := r.Placed(k, []*corev1.Pod{bound, pending}); len(got) != 1 || got["b"] != "n1" {
		t.Fatalf("Placed after forget = %v", got)
	}
	if len(r.Assumed(k)) != 0 {
		t.Fatalf("assumed left over")
	}
}
