package admissionpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func classes(pcs ...*schedulingv1.PriorityClass) PriorityClassLookup {
	return func(name string) (*schedulingv1.PriorityClass, error) {
		for _, pc := range pcs {
			if pc.Name == name {
				return pc, nil
			}
		}
		return nil, nil
	}
}

// The params are what the engine fills: every combination of the four Pod defaults has its
// defaulted-by value and warning, the priority comes from the PriorityClass, and the allowed queues
// carry their refusal message.
func TestParams(t *testing.T) {
	pols, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{*builders.TeamA().Obj()})
	require.NoError(t, err)
	ns := defaults.Namespace{Name: "ml", Labels: map[string]string{"team": "a"}}
	pp := corev1.PreemptLowerPriority
	data, err := Params(ns, pols, classes(&schedulingv1.PriorityClass{Value: 1000, PreemptionPolicy: &pp, ObjectMeta: metav1.ObjectMeta{Name: "batch-normal"}}))
	require.NoError(t, err)
	assert.Equal(t, "team-a", data[KeyPolicy])
	assert.Equal(t, "team-a", data[KeyPodQueue])
	assert.Equal(t, "batch-normal", data[KeyPodPriorityClassName])
	assert.Equal(t, "1000", data[KeyPodPriority])
	assert.Equal(t, "PreemptLowerPriority", data[KeyPodPreemptionPolicy])
	assert.Equal(t, "hyperbatch-scheduler", data[KeyPodSchedulerName])
	assert.Equal(t, "hard", data[KeyPodTopologyMode])
	assert.Equal(t, "2", data[KeyPodTopologyTier])
	defaultedBy, warnings := strings.Split(data[KeyPodDefaultedByList], "\n"), strings.Split(data[KeyPodWarnings], "\n")
	require.Len(t, defaultedBy, podAllBits)
	require.Len(t, warnings, podAllBits)
	for m := 1; m <= podAllBits; m++ {
		assert.NotEmpty(t, defaultedBy[m-1], "combination %d", m)
		assert.NotEmpty(t, warnings[m-1], "combination %d", m)
	}
	assert.Equal(t, "team-a/queue,priorityClassName,schedulerName,networkTopology", defaultedBy[15-1])
	assert.Contains(t, warnings[2-1], "spec.priority=1000, spec.preemptionPolicy=PreemptLowerPriority from PriorityClass batch-normal")
	assert.Equal(t, ` is not allowed in namespace "ml": WorkloadPolicy "team-a" allows only "team-a", "shared"`+"\nteam-a\nshared", data[KeyQueueRules])
	assert.Contains(t, data[KeyPodTopologySkip], "was not defaulted: it would contradict ")
	assert.NotContains(t, data, KeyPodPriorityClassDenial)

	// A missing class: the refusal, no priority.
	data, err = Params(ns, pols, classes())
	require.NoError(t, err)
	assert.Contains(t, data[KeyPodPriorityClassDenial], `PriorityClass "batch-normal" does not exist`)
	assert.NotContains(t, data, KeyPodPriority)

	// The namespace's queue annotation wins; no policy: nothing but the namespace's queue.
	data, err = Params(defaults.Namespace{Name: "solo", Annotations: map[string]string{defaults.QueueNameAnnotation: "own"}}, pols, classes())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{KeyPodQueue: "own",
		// combination 1 on the first line, the 14 others empty
		KeyPodDefaultedByList: "namespace:solo/queue" + strings.Repeat("\n", 14),
		KeyPodWarnings:        "hyperbatch: defaulted metadata.annotations[scheduling.volcano.sh/queue-name]=own from namespace solo (annotation scheduling.volcano.sh/queue-name)" + strings.Repeat("\n", 14)}, data)

	// An invalid policy's allowed queues apply (fail closed), with its message.
	bad := builders.MakePolicy("bad").Weight(100).InvalidSelector().AllowedQueues("x").Obj()
	pols, _ = defaults.NewPolicies([]hbv1.WorkloadPolicy{*bad, *builders.TeamA().Obj()})
	data, err = Params(ns, pols, classes())
	require.NoError(t, err)
	assert.Contains(t, data[KeyQueueRules], "its namespaceSelector is invalid")
	assert.Contains(t, data[KeyQueueRules], "\n\n", "two rules")
}

// NoWarnings leaves out exactly the Warn policy and its binding, which WarnObjects lists (binding
// first) for the manager to delete.
func TestNoWarnings(t *testing.T) {
	names := func(objs []client.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, fmt.Sprintf("%T/%s", o, o.GetName()))
		}
		return out
	}
	all, without := names(Objects(Options{})), names(Objects(Options{NoWarnings: true}))
	warn := names(WarnObjects())
	assert.Equal(t, []string{
		"*v1.ValidatingAdmissionPolicyBinding/" + WarnPolicyName(defaults.KindPod),
		"*v1.ValidatingAdmissionPolicy/" + WarnPolicyName(defaults.KindPod),
	}, warn)
	assert.ElementsMatch(t, all, append(slices.Clone(without), warn...))
}
