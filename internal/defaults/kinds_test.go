package defaults

import (
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Every row of the kind table is whole: its New object is of its GVK (by the upstream schemes),
// its paths are distinct, a kind with defaults has a mutating path and the carry-over rule, and its
// engine function is the kind function (it fills a bare object of the kind under teamA).
func TestKindTable(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, batchv1alpha1.AddToScheme,
		schedulingv1beta1.AddToScheme, jobsetv1alpha2.AddToScheme, trainingv1alpha1.AddToScheme,
		policyv1alpha1.Install, hbv1.AddToScheme} {
		require.NoError(t, add(s))
	}
	paths := map[string]Kind{}
	pols := mustPolicies(t, teamA())
	require.Len(t, Kinds(), 8)
	for _, spec := range Kinds() {
		t.Run(string(spec.Kind), func(t *testing.T) {
			gvks, _, err := s.ObjectKinds(spec.New())
			require.NoError(t, err)
			assert.Contains(t, gvks, spec.GVK, "New() is an object of the row's GVK")
			assert.NotEmpty(t, spec.Resource)
			for _, p := range []string{spec.MutatePath, spec.ValidatePath} {
				if p == "" {
					continue
				}
				assert.Truef(t, strings.HasPrefix(p, "/mutate-") || strings.HasPrefix(p, "/validate-"), "path %s", p)
				if other, dup := paths[p]; dup {
					t.Errorf("path %s of %s is also %s's", p, spec.Kind, other)
				}
				paths[p] = spec.Kind
			}
			assert.NotEmpty(t, spec.ValidatePath, "every kind is validated")
			if spec.Default == nil {
				assert.Empty(t, spec.MutatePath, "no engine function, no mutating webhook")
				assert.Equal(t, CarryOverNone, spec.CarryOver)
				return
			}
			assert.NotEmpty(t, spec.MutatePath)
			assert.Equal(t, CarryOverDropped, spec.CarryOver)
			obj := spec.New()
			obj.SetNamespace("a")
			res := spec.Default(obj, nsA, pols)
			if spec.Kind != KindPod && spec.Kind != KindPropagationPolicy {
				// A bare Pod and PropagationPolicy are filled too, checked below with the typed call.
				assert.True(t, res.Changed(), "the engine function fills a bare %s", spec.Kind)
			}
			assert.Equal(t, res.DefaultedBy, obj.GetAnnotations()[hbv1.DefaultedByAnnotation])
			// Another type is left alone.
			other := &hbv1.WorkloadPolicy{}
			assert.False(t, spec.Default(other, nsA, pols).Changed())
			assert.Empty(t, other.Annotations)
		})
	}
	pod := &corev1.Pod{}
	spec, ok := LookupKind(KindPod)
	require.True(t, ok)
	assert.Equal(t, Pod(pod.DeepCopy(), nsA, pols), spec.Default(pod, nsA, pols), "the Pod row calls Pod")
	_, ok = LookupKind("Job")
	assert.False(t, ok)
}

// The Volcano Job row is the admission rule: a HyperJob's child gets no TTL of its own, a queue
// the user wrote is kept, and "default" without evidence counts as unset.
func TestVolcanoJobRow(t *testing.T) {
	spec, ok := LookupKind(KindVolcanoJob)
	require.True(t, ok)
	pols := mustPolicies(t, teamA())
	plain := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{Queue: "default"}}
	spec.Default(plain, nsA, pols)
	assert.NotEqual(t, "default", plain.Spec.Queue)
	assert.NotNil(t, plain.Spec.TTLSecondsAfterFinished)

	child := &batchv1alpha1.Job{}
	child.OwnerReferences = ownerRefs("HyperJob", trainingv1alpha1.SchemeGroupVersion.String())
	spec.Default(child, nsA, pols)
	assert.Nil(t, child.Spec.TTLSecondsAfterFinished, "a HyperJob's child gets no TTL of its own")
	assert.NotEmpty(t, child.Spec.Queue)
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("*")
	require.NoError(t, err)
	assert.Equal(t, KindNames(), got)
	got, err = ParseKinds("hyperjob, VolcanoJob,PROPAGATIONPOLICY,")
	require.NoError(t, err)
	assert.Equal(t, []Kind{KindHyperJob, KindVolcanoJob, KindPropagationPolicy}, got)
	_, err = ParseKinds("Pod,Deployment")
	assert.EqualError(t, err, `unknown kind "Deployment"; valid kinds are Pod, VolcanoJob, PodGroup, JobSet, HyperJob, TrainJob, PropagationPolicy, WorkloadPolicy, or * for all`)
	_, err = ParseKinds("")
	assert.ErrorContains(t, err, "no kind given")
}

// The exported parser reads what the engine writes, with structured sources, and writes it back.
func TestParseDefaultedBy(t *testing.T) {
	v := "namespace:ml/queue;team-a/networkTopology,priorityClassName;jobset:train/queue;vcjob:j/queue;bare"
	got := ParseDefaultedBy(v)
	assert.Equal(t, []DefaultedByEntry{
		{Source: Source{Kind: SourceNamespace, Name: "ml"}, Fields: []string{FieldQueue}},
		{Source: Source{Kind: SourcePolicy, Name: "team-a"}, Fields: []string{FieldPriorityClassName, FieldNetworkTopology}},
		{Source: Source{Kind: SourceJobSet, Name: "train"}, Fields: []string{FieldQueue}},
		{Source: Source{Kind: SourceVolcanoJob, Name: "j"}, Fields: []string{FieldQueue}},
		{Source: Source{Kind: SourcePolicy, Name: "bare"}},
	}, got)
	assert.Equal(t, "namespace:ml/queue;team-a/priorityClassName,networkTopology;jobset:train/queue;vcjob:j/queue;bare", FormatDefaultedBy(got))
	assert.Empty(t, ParseDefaultedBy(" ; "))

	// What the engine writes parses back to its Fills' sources.
	pod := &corev1.Pod{}
	res := Pod(pod, nsML, mustPolicies(t, teamA()))
	entries := ParseDefaultedBy(pod.Annotations[hbv1.DefaultedByAnnotation])
	for _, f := range res.Fills {
		found := false
		for _, e := range entries {
			if e.Source == f.Source {
				assert.Contains(t, e.Fields, f.Field)
				found = true
			}
		}
		assert.Truef(t, found, "source %v of %s", f.Source, f.Path)
	}
}

func TestDescribeSource(t *testing.T) {
	for _, tc := range []struct {
		src   Source
		field string
		want  string
	}{
		{Source{Kind: SourcePolicy, Name: "team-a"}, FieldQueue, "WorkloadPolicy team-a"},
		{Source{Kind: SourcePolicy}, FieldQueue, "hyperbatch"},
		{Source{Kind: SourceNamespace, Name: "ml"}, FieldQueue, "namespace ml (annotation scheduling.volcano.sh/queue-name)"},
		{Source{Kind: SourceJobSet, Name: "t"}, FieldQueue, "JobSet t (its scheduling.volcano.sh/queue-name annotation)"},
		{Source{Kind: SourceJobSet, Name: "t"}, FieldGroupName, "JobSet t (its name: the JobSet's PodGroup)"},
		{Source{Kind: SourceVolcanoJob, Name: "j"}, FieldQueue, "Volcano Job j (its spec: the PodGroup follows its Job)"},
	} {
		assert.Equal(t, tc.want, DescribeSource(tc.src, tc.field))
		assert.Equal(t, tc.want, Fill{Source: tc.src, Field: tc.field}.Describe())
		assert.Equal(t, tc.src, ParseSource(tc.src.String()), "ParseSource reads what Source.String writes")
	}
}

func ownerRefs(kind, apiVersion string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "u", Controller: ptr.To(true)}}
}
