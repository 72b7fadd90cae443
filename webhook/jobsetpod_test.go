package webhook

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func gateJobSet(name, scheduler string, annotations map[string]string) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Annotations: annotations},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{SchedulerName: scheduler}}}}}}},
	}
}

// gatePod is a pod of JobSet jobSet in namespace a, in group group ("" for none).
func gatePod(jobSet, group string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", GenerateName: jobSet + "-w-0-0-",
		Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: jobSet}}}
	if group != "" {
		p.Annotations = map[string]string{defaults.GroupNameAnnotation: group}
	}
	return p
}

// The gate refuses a gang member pod until its JobSet's PodGroup exists, naming it; every other pod
// passes.
func TestJobSetPodGate(t *testing.T) {
	ns := namespace("a", nil, nil)
	gang := gateJobSet("gang", defaults.HyperbatchSchedulerName, nil)
	optedOut := gateJobSet("plain", defaults.HyperbatchSchedulerName, map[string]string{hbv1.GangAnnotation: hbv1.GangAnnotationOptOut})
	notGang := gateJobSet("other", "", nil)
	ready := gateJobSet("ready", defaults.VolcanoSchedulerName, nil)
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "ready"}}
	d := testDeps(t, ns, gang, optedOut, notGang, ready, pg)
	gate := d.handlers([]Kind{KindJobSet})[ValidateJobSetPodPath]
	require.NotNil(t, gate, "the JobSet kind serves the PodGroup gate")

	resp := gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("gang", "gang"), nil))
	wantDenied(t, resp, http.StatusUnprocessableEntity, ReasonPodGroupMissing, "PodGroup a/gang of JobSet gang does not exist yet",
		"metadata.annotations[scheduling.k8s.io/group-name]", "retries")

	for name, pod := range map[string]*corev1.Pod{
		"PodGroup exists":            gatePod("ready", "ready"),
		"opted out":                  gatePod("plain", "plain"),
		"not a gang":                 gatePod("other", "other"),
		"JobSet gone":                gatePod("gone", "gone"),
		"no group name":              gatePod("gang", ""),
		"a group of the user's name": gatePod("gang", "mine"),
		"not a JobSet's pod":         {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", Annotations: map[string]string{defaults.GroupNameAnnotation: "gang"}}},
	} {
		resp := gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, pod, nil))
		assert.True(t, resp.Allowed, "%s: denied: %+v", name, resp.Result)
	}
	// UPDATE never waits (the pod exists already).
	p := gatePod("gang", "gang")
	p.Name = "gang-w-0-0-x"
	resp = gate.Handle(t.Context(), request(t, KindPod, admissionv1.Update, p, p))
	assert.True(t, resp.Allowed, "UPDATE denied: %+v", resp.Result)

	// Once the PodGroup is there, the same pod passes.
	require.NoError(t, d.reader.(client.Client).Create(t.Context(), &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gang"}}))
	resp = gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("gang", "gang"), nil))
	assert.True(t, resp.Allowed, "denied with the PodGroup present: %+v", resp.Result)
}

// Without controllers/podgroup (Options.NoPodGroupGate) the gate admits every pod.
func TestJobSetPodGateOff(t *testing.T) {
	d := testDeps(t, namespace("a", nil, nil), gateJobSet("gang", defaults.HyperbatchSchedulerName, nil))
	d.noPodGroupGate = true
	gate := d.handlers([]Kind{KindJobSet})[ValidateJobSetPodPath]
	resp := gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("gang", "gang"), nil))
	assert.True(t, resp.Allowed, "denied with the gate off: %+v", resp.Result)
}

// A PodGroup the cache has not seen yet is read from the apiserver before a pod is refused.
func TestJobSetPodGateConfirmsMissesLive(t *testing.T) {
	ns := namespace("a", nil, nil)
	gang := gateJobSet("gang", defaults.HyperbatchSchedulerName, nil)
	d := testDeps(t, ns, gang)
	d.live = testDeps(t, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gang"}}).reader
	gate := d.handlers([]Kind{KindJobSet})[ValidateJobSetPodPath]
	resp := gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("gang", "gang"), nil))
	assert.True(t, resp.Allowed, "denied although the apiserver has the PodGroup: %+v", resp.Result)
}

// The gate's entry: CREATE of pods with a JobSet name label, in every namespace but the excluded
// ones (no Pod opt-in label), failing open with the Pod timeout; it comes with the JobSet kind.
func TestJobSetPodGateEntry(t *testing.T) {
	_, vwc := Configurations(ConfigOptions{Kinds: []Kind{KindJobSet}})
	require.Len(t, vwc.Webhooks, 3) // the JobSet's CREATE and UPDATE entries, then the gate
	w := vwc.Webhooks[2]
	assert.Equal(t, JobSetPodGateEntryName, w.Name)
	assert.Equal(t, ValidateJobSetPodPath, *w.ClientConfig.Service.Path)
	assert.Equal(t, admissionregistrationv1.Ignore, *w.FailurePolicy)
	assert.Equal(t, PodTimeoutSeconds, *w.TimeoutSeconds)
	assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, w.Rules[0].Operations)
	assert.Equal(t, []string{"pods"}, w.Rules[0].Resources)
	assert.Empty(t, w.NamespaceSelector.MatchLabels, "the gate must not need the Pod opt-in label")
	// A JobSet's pods whose template the JobSet webhook marked as a gang's, not every JobSet pod.
	assert.Equal(t, []metav1.LabelSelectorRequirement{
		{Key: jobsetv1alpha2.JobSetNameKey, Operator: metav1.LabelSelectorOpExists},
		{Key: hbv1.JobSetGangLabel, Operator: metav1.LabelSelectorOpExists},
	}, w.ObjectSelector.MatchExpressions)

	_, vwc = Configurations(ConfigOptions{Kinds: []Kind{KindPod}})
	for _, w := range vwc.Webhooks {
		assert.NotEqual(t, JobSetPodGateEntryName, w.Name, "no gate without the JobSet kind")
	}
}

// A pod of Trainer's PodGroup (controlled by a TrainJob) waits while its TrainJob asks for
// sub-groups and the PodGroup has none yet; it passes once they are there, and at once when the
// TrainJob asks for none.
func TestJobSetPodGateWaitsForTrainJobSubGroups(t *testing.T) {
	ns := namespace("a", nil, nil)
	tj := trainJobObj(map[string]string{hbv1.SubGroupByAnnotation: hbv1.SubGroupByPods, hbv1.SubGroupPodsAnnotation: "4"})
	tj.SetUID("tj-uid")
	plain := trainJobObj(nil)
	plain.SetName("plain")
	plain.SetUID("plain-uid")
	ref := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: defaults.TrainJobGVK.GroupVersion().String(), Kind: defaults.TrainJobGVK.Kind,
			Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "llm", OwnerReferences: ref("llm", "tj-uid")}}
	plainPG := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "plain", OwnerReferences: ref("plain", "plain-uid")}}
	d := testDeps(t, ns, tj, plain, pg, plainPG)
	gate := d.handlers([]Kind{KindJobSet})[ValidateJobSetPodPath]

	resp := gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("llm", "llm"), nil))
	wantDenied(t, resp, http.StatusUnprocessableEntity, ReasonSubGroupsMissing, "PodGroup a/llm of TrainJob llm has no subGroupPolicy yet",
		"annotation hyperbatch.dev/subgroup-by", "retries")
	resp = gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("plain", "plain"), nil))
	assert.True(t, resp.Allowed, "a TrainJob without sub-groups: denied: %+v", resp.Result)

	pg.Spec.SubGroupPolicy = []schedulingv1beta1.SubGroupPolicySpec{{Name: "node-c0"}}
	require.NoError(t, d.reader.(client.Client).Update(t.Context(), pg))
	resp = gate.Handle(t.Context(), request(t, KindPod, admissionv1.Create, gatePod("llm", "llm"), nil))
	assert.True(t, resp.Allowed, "denied with the sub-groups present: %+v", resp.Result)
}
