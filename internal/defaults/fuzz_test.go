package defaults

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// fuzzInputs are the policy and namespace values a fuzz case draws.
type fuzzInputs struct {
	queue, pcn, sched, nsQueue, mode, tierName string
	tier                                       int32
	ttl                                        int32
	deadline                                   int64
}

func (in fuzzInputs) setup(t *testing.T) (Namespace, *Policies) {
	d := hbv1.PolicyDefaults{Queue: in.queue, PriorityClassName: in.pcn, SchedulerName: in.sched}
	if in.mode != "" || in.tier != 0 || in.tierName != "" {
		d.NetworkTopology = &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyMode(in.mode), HighestTierName: in.tierName}
		if in.tier != 0 {
			tier := in.tier
			d.NetworkTopology.HighestTierAllowed = &tier
		}
	}
	if in.ttl >= 0 {
		ttl := in.ttl
		d.TTLSecondsAfterFinished = &ttl
	}
	if in.deadline > 0 {
		dl := in.deadline
		d.ActiveDeadlineSeconds = &dl
	}
	ns := Namespace{Name: "ns"}
	if in.nsQueue != "" {
		ns.Annotations = map[string]string{QueueNameAnnotation: in.nsQueue}
	}
	return ns, mustPolicies(t, hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}, Spec: hbv1.WorkloadPolicySpec{Defaults: d}})
}

// checkFilledQueue asserts a filled queue came from the namespace annotation or the policy.
func (in fuzzInputs) checkFilledQueue(t *testing.T, q string) {
	t.Helper()
	if want := NormalizeQueue(in.nsQueue); want != "" {
		if q != want {
			t.Fatalf("queue %q, want the namespace annotation's %q", q, want)
		}
		return
	}
	if q != NormalizeQueue(in.queue) {
		t.Fatalf("queue %q, want the policy's %q", q, NormalizeQueue(in.queue))
	}
}

// carryAnnotation copies key from once into exp's annotations.
func carryAnnotation(exp *metav1.ObjectMeta, once metav1.ObjectMeta, key string) {
	v, ok := once.Annotations[key]
	if !ok {
		return
	}
	if exp.Annotations == nil {
		exp.Annotations = map[string]string{}
	}
	exp.Annotations[key] = v
}

// checkHistory asserts the defaulted-by annotation was merged, not replaced, and the Result agrees.
func checkHistory(t *testing.T, before, after metav1.ObjectMeta, res Result) {
	t.Helper()
	if !res.Changed() {
		if res.DefaultedBy != "" {
			t.Fatalf("DefaultedBy %q without any field filled", res.DefaultedBy)
		}
		return
	}
	if after.Annotations[hbv1.DefaultedByAnnotation] != res.DefaultedBy {
		t.Fatalf("annotation %q != Result.DefaultedBy %q", after.Annotations[hbv1.DefaultedByAnnotation], res.DefaultedBy)
	}
	old, now := parseDefaultedBy(before.Annotations[hbv1.DefaultedByAnnotation]), parseDefaultedBy(res.DefaultedBy)
	for _, e := range old.entries {
		i := slices.IndexFunc(now.entries, func(n provenanceEntry) bool { return n.source == e.source })
		for _, f := range e.fields {
			if i < 0 || !slices.Contains(now.entries[i].fields, f) {
				t.Fatalf("history lost: %s/%s missing from %q", e.source, f, res.DefaultedBy)
			}
		}
	}
}

func FuzzPodDefaults(f *testing.F) {
	f.Add([]byte(`{}`), "team-a", "batch-normal", "hyperbatch-scheduler", "", "hard", "", int32(2))
	f.Add([]byte(`{"metadata":{"annotations":{"scheduling.volcano.sh/queue-name":" ","hyperbatch.dev/defaulted-by":"x/queue;;y"}},`+
		`"spec":{"priority":0,"preemptionPolicy":"Never","schedulerName":"default-scheduler"}}`), "q", "p", "s", "namespace/ml", "", "", int32(0))
	f.Add([]byte(`{"metadata":{"annotations":{"volcano.sh/network-topology-mode":"soft"}},"spec":{"priorityClassName":"mine"}}`),
		"", "p", "", " ", "soft", "spine", int32(1))
	f.Add([]byte(`not json`), " ", " ", " ", "default", " ", " ", int32(-1))
	f.Fuzz(func(t *testing.T, raw []byte, queue, pcn, sched, nsQueue, mode, tierName string, tier int32) {
		in := fuzzInputs{queue: queue, pcn: pcn, sched: sched, nsQueue: nsQueue, mode: mode, tierName: tierName, tier: tier, ttl: -1}
		ns, pols := in.setup(t)
		before := &corev1.Pod{}
		_ = json.Unmarshal(raw, before) // a partial decode is as good an input as any

		once, res := applyOnce(t, before, (*corev1.Pod).DeepCopy, func(o *corev1.Pod) Result { return Pod(o, ns, pols) })
		checkHistory(t, before.ObjectMeta, once.ObjectMeta, res)

		// Rebuild the expected object: the input plus exactly the fields that were unset.
		exp := before.DeepCopy()
		if NormalizeQueue(before.Annotations[QueueNameAnnotation]) == "" {
			carryAnnotation(&exp.ObjectMeta, once.ObjectMeta, QueueNameAnnotation)
			if q, ok := once.Annotations[QueueNameAnnotation]; ok && q != before.Annotations[QueueNameAnnotation] {
				in.checkFilledQueue(t, q)
			}
		}
		_, hasMode := before.Annotations[NetworkTopologyModeAnnotation]
		_, hasTier := before.Annotations[NetworkTopologyHighestTierAnnotation]
		if !hasMode && !hasTier {
			carryAnnotation(&exp.ObjectMeta, once.ObjectMeta, NetworkTopologyModeAnnotation)
			carryAnnotation(&exp.ObjectMeta, once.ObjectMeta, NetworkTopologyHighestTierAnnotation)
		}
		if res.Changed() {
			carryAnnotation(&exp.ObjectMeta, once.ObjectMeta, hbv1.DefaultedByAnnotation)
		}
		if before.Spec.PriorityClassName == "" {
			exp.Spec.PriorityClassName, exp.Spec.Priority, exp.Spec.PreemptionPolicy =
				once.Spec.PriorityClassName, once.Spec.Priority, once.Spec.PreemptionPolicy
		}
		// "default-scheduler" is what the apiserver writes for an omitted schedulerName; it yields
		// to a policy that names another scheduler.
		if before.Spec.SchedulerName == "" ||
			(before.Spec.SchedulerName == corev1.DefaultSchedulerName && sched != "" && sched != corev1.DefaultSchedulerName) {
			exp.Spec.SchedulerName = once.Spec.SchedulerName
			if before.Spec.SchedulerName != "" && once.Spec.SchedulerName != sched {
				t.Fatalf("schedulerName %q, want the policy's %q in place of default-scheduler", once.Spec.SchedulerName, sched)
			}
		}
		if !reflect.DeepEqual(exp, once) {
			t.Fatalf("a user-set field changed (-allowed +got):\n%s", diff.Diff(exp, once))
		}
		if strings.Contains(res.DefaultedBy, "namespace:") && NormalizeQueue(nsQueue) == "" {
			t.Fatalf("namespace source recorded without a namespace queue: %q", res.DefaultedBy)
		}
	})
}

func FuzzVolcanoJobDefaults(f *testing.F) {
	f.Add([]byte(`{}`), "team-a", "batch-normal", "hyperbatch-scheduler", "", "hard", "", int32(2), int32(86400), int64(604800))
	f.Add([]byte(`{"metadata":{"annotations":{"hyperbatch.dev/active-deadline-seconds":" ","hyperbatch.dev/defaulted-by":"/queue"}},`+
		`"spec":{"queue":"default","minAvailable":2,"tasks":[{"name":"w","replicas":2}]}}`), "namespace/q", "p", "s", "ml", "", "", int32(0), int32(0), int64(1))
	f.Add([]byte(`{"spec":{"queue":"namespace/default","networkTopology":{"mode":"soft"},"ttlSecondsAfterFinished":5,"priorityClassName":"x"}}`),
		"q", "p", "", "", "soft", "spine", int32(3), int32(-1), int64(0))
	f.Add([]byte(`[`), "", "", "", "", "", "", int32(0), int32(-5), int64(-5))
	f.Fuzz(func(t *testing.T, raw []byte, queue, pcn, sched, nsQueue, mode, tierName string, tier, ttl int32, deadline int64) {
		in := fuzzInputs{queue: queue, pcn: pcn, sched: sched, nsQueue: nsQueue, mode: mode, tierName: tierName,
			tier: tier, ttl: ttl, deadline: deadline}
		ns, pols := in.setup(t)
		before := &batchv1alpha1.Job{}
		_ = json.Unmarshal(raw, before)

		once, res := applyOnce(t, before, (*batchv1alpha1.Job).DeepCopy, func(o *batchv1alpha1.Job) Result { return VolcanoJob(o, ns, pols) })
		checkHistory(t, before.ObjectMeta, once.ObjectMeta, res)

		exp := before.DeepCopy()
		if queueUnsetInSpec(before.Spec.Queue) {
			exp.Spec.Queue = once.Spec.Queue
			if once.Spec.Queue != before.Spec.Queue {
				in.checkFilledQueue(t, once.Spec.Queue)
			}
		}
		if before.Spec.PriorityClassName == "" {
			exp.Spec.PriorityClassName = once.Spec.PriorityClassName
		}
		if before.Spec.SchedulerName == "" {
			exp.Spec.SchedulerName = once.Spec.SchedulerName
		}
		if before.Spec.NetworkTopology == nil {
			exp.Spec.NetworkTopology = once.Spec.NetworkTopology
		}
		if before.Spec.TTLSecondsAfterFinished == nil {
			exp.Spec.TTLSecondsAfterFinished = once.Spec.TTLSecondsAfterFinished
		}
		if strings.TrimSpace(before.Annotations[hbv1.ActiveDeadlineSecondsAnnotation]) == "" {
			carryAnnotation(&exp.ObjectMeta, once.ObjectMeta, hbv1.ActiveDeadlineSecondsAnnotation)
		}
		if res.Changed() {
			carryAnnotation(&exp.ObjectMeta, once.ObjectMeta, hbv1.DefaultedByAnnotation)
		}
		if !reflect.DeepEqual(exp, once) {
			t.Fatalf("a user-set field changed (-allowed +got):\n%s", diff.Diff(exp, once))
		}
	})
}
