package webhook

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// checkTopLevelCopy fills m's copy of obj as a CREATE does, in every namespace, and fails when
// that changed obj: the engine and finish of a kind using ownTopLevel must not write through
// anything the copy shares with the request's object.
func checkTopLevelCopy[T client.Object](t *testing.T, d *deps, h any, obj T) {
	t.Helper()
	m := h.(*mutator[T])
	if m.copyObj == nil {
		t.Fatalf("%s does not use a top-level copy", m.kind)
	}
	pols, err := d.policies.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snapshot := obj.DeepCopyObject()
	for _, ns := range []defaults.Namespace{
		defaults.NamespaceOf(nsA),
		{Name: "a", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{defaults.QueueNameAnnotation: "ns-queue"}},
		{Name: "other"},
	} {
		out := m.copyObj(obj)
		res, err := m.apply(context.Background(), out, ns, pols)
		if err != nil {
			t.Fatal(err)
		}
		if m.finish != nil && res.Changed() {
			if _, _, err := m.finish(context.Background(), out, ns, res); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(obj, snapshot) {
			t.Fatalf("%s: filling the copy changed the request's object\nbefore %+v\nafter  %+v", m.kind, snapshot, obj)
		}
	}
}

// The kinds that fill a top-level copy leave the request's object as it was, for any object.
func FuzzTopLevelCopies(f *testing.F) {
	f.Add(uint8(0), []byte(`{"metadata":{"annotations":{"a":"b"}},"spec":{"containers":[{"name":"c"}],"priority":5,"preemptionPolicy":"Never"}}`))
	f.Add(uint8(1), []byte(`{"metadata":{"annotations":{"hyperbatch.dev/defaulted-by":"x/queue"}},"spec":{"networkTopology":{"mode":"soft"},"ttlSecondsAfterFinished":3,"tasks":[{"name":"w"}]}}`))
	f.Add(uint8(2), []byte(`{"spec":{"queue":"default","networkTopology":{"highestTierAllowed":1},"minResources":{"cpu":"1"}}}`))
	f.Add(uint8(1), []byte(`{"spec":{}}`))
	d := testDeps(f, teamA(), nsA, batchNormal())
	f.Fuzz(func(t *testing.T, kind uint8, raw []byte) {
		switch kind % 3 {
		case 0:
			var pod corev1.Pod
			if json.Unmarshal(raw, &pod) == nil {
				checkTopLevelCopy(t, d, d.podMutator(), &pod)
			}
		case 1:
			var job batchv1alpha1.Job
			if json.Unmarshal(raw, &job) == nil {
				checkTopLevelCopy(t, d, d.volcanoJobMutator(), &job)
			}
		default:
			var pg schedulingv1beta1.PodGroup
			if json.Unmarshal(raw, &pg) == nil {
				checkTopLevelCopy(t, d, d.podGroupMutator(), &pg)
			}
		}
	})
}
