package admissionpolicy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// PolicyChangeBound is the documented bound (docs/webhooks.md, "Admission policies") on the time
// from a WorkloadPolicy change to Pods of a governed namespace being admitted with it in policy
// mode: the admissionparams controller's watch and write, then the apiserver's ConfigMap informer.
const PolicyChangeBound = 5 * time.Second

// dryRunQueue is the queue a dry-run bare Pod in ns is admitted with.
func dryRunQueue(ctx context.Context, ns string) (string, error) {
	pod := bare("probe")
	pod.Namespace = ns
	if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		return "", err
	}
	return pod.Annotations[defaults.QueueNameAnnotation], nil
}

// TestFailureModes runs last in this package (its file, outage_test.go, sorts last): it stops the
// manager.
func TestFailureModes(t *testing.T) {
	c, w := warningClient(t)

	t.Run("policy change reaches the params within the bound", func(t *testing.T) {
		ctx, cancel := framework.Context(2 * time.Minute)
		defer cancel()
		// Queues the fail-closed bad-selector fixture allows, in turn.
		queues := []string{"team-a", "b-only"}
		pol := builders.MakePolicy("changing").Selector("team", "changing").Queue(queues[0]).Obj()
		require.NoError(t, env.Client.Create(ctx, pol))
		p := profile(t, "changing", map[string]string{"team": "changing"}, nil)
		var took []time.Duration
		for i := 1; i <= 5; i++ {
			want := queues[i%2]
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pol), pol))
			pol.Spec.Defaults.Queue = want
			start := time.Now()
			require.NoError(t, env.Client.Update(ctx, pol))
			require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				got, err := dryRunQueue(ctx, p.policy)
				return got == want, err
			}), "queue %s never reached the policy namespace", want)
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("policy change to admission in policy mode: min %v, median %v, max %v over %d changes", took[0], took[len(took)/2], took[len(took)-1], len(took))
		assert.LessOrEqual(t, took[len(took)-1], PolicyChangeBound, "slowest change")
	})

	// A namespace the policies match but whose params are missing (here: not opted in, so the
	// controller writes none) is admitted unchanged and unchecked, as a namespace whose Pod webhook
	// cannot be reached is (the Pod webhooks fail open). Both sides are shown below: this one with
	// the manager up, the webhook side after it stops.
	noParams := "pol-no-params"
	require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: noParams, Labels: map[string]string{modeLabel: "policy", "team": "a"}}}))
	refused := bare("refused")
	refused.Annotations = map[string]string{defaults.QueueNameAnnotation: "gpu"}
	missing := map[string]outcome{}
	t.Run("params missing: passed unchanged in policy mode", func(t *testing.T) {
		// Positive signal first: the policies run (profile waits until a Pod is defaulted by them).
		profile(t, "no-params-probe", map[string]string{"team": "a"}, nil)
		ctx, cancel := framework.Context(10 * time.Second)
		defer cancel()
		var cm corev1.ConfigMap
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: noParams, Name: admissionpolicy.ParamsName}, &cm)
		require.True(t, client.IgnoreNotFound(err) == nil && err != nil, "no params in %s", noParams)
		for _, pod := range []*corev1.Pod{bare("plain"), refused} {
			o := create(t, c, w, noParams, pod)
			require.Empty(t, o.err, "%s: admitted", pod.Name)
			assert.Empty(t, annotations(o)[hbv1.DefaultedByAnnotation], "%s: not defaulted", pod.Name)
			missing[pod.Name] = o
		}
	})

	team := profile(t, "outage", map[string]string{"team": "a"}, nil)
	env.StopManager()

	t.Run("manager down: policy mode keeps applying the last params", func(t *testing.T) {
		o := create(t, c, w, team.policy, bare("after-outage"))
		require.Empty(t, o.err)
		assert.Equal(t, "team-a", annotations(o)[defaults.QueueNameAnnotation], "defaulted from the params written before the outage")
		o = create(t, c, w, team.policy, refused)
		assert.Contains(t, o.err, `queue "gpu" is not allowed`, "still checked")
	})

	t.Run("manager down: webhook mode passes Pods unchanged, as policy mode does without params", func(t *testing.T) {
		for _, pod := range []*corev1.Pod{bare("plain"), refused} {
			o := create(t, c, w, team.webhook, pod)
			require.Empty(t, o.err, "%s: admitted (the Pod webhooks fail open)", pod.Name)
			pol := missing[pod.Name]
			assert.Equal(t, pol.obj, o.obj, "%s: webhook down = params missing", pod.Name)
		}
	})
}

// annotations are the stored Pod's annotations (nil when it has none).
func annotations(o outcome) map[string]any {
	meta, _ := o.obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	return ann
}
