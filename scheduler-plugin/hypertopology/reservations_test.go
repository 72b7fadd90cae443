package hypertopology

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

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

// A hold keeps its nodes from pods of lower or equal priority outside the gang, not from the gang
// itself or from higher priorities, and ends at its expiry or when dropped.
func TestReservationsHolds(t *testing.T) {
	r := newReservations()
	now := time.Now()
	holder := gang.Key{Namespace: "ns", Name: "urgent"}
	other := gang.Key{Namespace: "ns", Name: "other"}
	r.setHold(holder, &hold{domain: "HyperNode leaf-0 (tier 1)", nodes: sets.New("n1", "n2"), priority: 100, expires: now.Add(time.Minute)})
	if got := r.holderOf("n1", other, 100, now); got != "ns/urgent" {
		t.Fatalf("equal priority: holder %q, want ns/urgent", got)
	}
	if got := r.holderOf("n1", gang.Key{}, 5, now); got != "ns/urgent" {
		t.Fatalf("lone pod of lower priority: holder %q, want ns/urgent", got)
	}
	if got := r.holderOf("n1", holder, 100, now); got != "" {
		t.Fatalf("the holder itself is kept off its own nodes by %q", got)
	}
	if got := r.holderOf("n1", other, 101, now); got != "" {
		t.Fatalf("a higher priority is kept off by %q", got)
	}
	if got := r.holderOf("n3", other, 0, now); got != "" {
		t.Fatalf("node outside the hold is held by %q", got)
	}
	if held := r.heldAgainst(other, 50, now); !held.Equal(sets.New("n1", "n2")) {
		t.Fatalf("heldAgainst = %v", held)
	}
	if !r.allHeld(other, now).Has("n2") || r.allHeld(holder, now).Len() != 0 {
		t.Fatal("allHeld must list other gangs' holds only")
	}
	if r.holdOf(holder, now.Add(2*time.Minute)) != nil || r.anyHold() {
		t.Fatal("an expired hold must be dropped")
	}
	r.setHold(holder, &hold{nodes: sets.New("n1"), priority: 100, expires: now.Add(time.Minute)})
	r.dropHold(holder)
	if r.holderOf("n1", other, 0, now) != "" {
		t.Fatal("a dropped hold still holds")
	}
}
