package hyperjob

import (
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func TestExpectations(t *testing.T) {
	e := newExpectations()
	ref := hyperJobRef{key: types.NamespacedName{Namespace: "ns", Name: "hj"}, uid: "u1"}
	if ok, _ := e.satisfied(ref, nil, nil); !ok {
		t.Fatal("no expectations must be satisfied")
	}
	e.created(ref, "hj-a-0", "j0")
	e.deleted(ref, "hj-a-1", "j1")
	e.applied(ref, "hj-a-0", "h0")
	old := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "hj-a-1", UID: "j1"}}
	if ok, left := e.satisfied(ref, map[string]*batchv1alpha1.Job{"hj-a-1": old}, nil); ok || left <= 0 || left > expectationTimeout {
		t.Fatalf("unmet expectations reported met (left %s)", left)
	}
	jobs := map[string]*batchv1alpha1.Job{"hj-a-0": {ObjectMeta: metav1.ObjectMeta{Name: "hj-a-0", UID: "j0"}}}
	pps := map[string]*policyv1alpha1.PropagationPolicy{"hj-a-0": {ObjectMeta: metav1.ObjectMeta{Name: "hj-a-0",
		Labels: map[string]string{hbv1.PPSpecHashLabel: "old"}}}}
	if ok, _ := e.satisfied(ref, jobs, pps); ok {
		t.Fatal("the applied hash is not in the cache yet")
	}
	pps["hj-a-0"].Labels[hbv1.PPSpecHashLabel] = "h0"
	if ok, _ := e.satisfied(ref, jobs, pps); !ok {
		t.Fatal("all expectations met: created job cached, deleted job gone, applied hash cached")
	}
	// A recreated HyperJob (new UID) does not inherit expectations; expired ones are dropped.
	e.created(ref, "hj-a-9", "j9")
	if ok, _ := e.satisfied(hyperJobRef{key: ref.key, uid: "u2"}, nil, nil); !ok {
		t.Fatal("expectations of another incarnation")
	}
	e.created(ref, "hj-a-9", "j9")
	e.m[ref.key].deadline = time.Now().Add(-time.Second)
	if ok, _ := e.satisfied(ref, nil, nil); !ok {
		t.Fatal("expired expectations must not block")
	}
}
