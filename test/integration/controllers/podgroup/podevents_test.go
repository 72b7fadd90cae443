package podgroup

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// A burst of a gang's pod events is priced in a few passes, not one pass a pod: 300 pods of one
// JobSet, each asking 2 cpu where the template asks 1, are created at once; the PodGroup ends at the
// price of the 300 pods (the positive signal that the last pod was priced) after at most a handful
// of reconciles (one per PodEventBatch). A pass reads and prices every pod of the gang, so one pass a pod event is
// quadratic in the gang's size (at 10,000 pods, about 50 ms a pass).
func TestPodEventsOfAGangAreBatched(t *testing.T) {
	const pods = 300
	ns := namespace(t)
	js := newJobSet(ns, "burst", 1, pods, corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}}}}})
	require.NoError(t, env.Client.Create(ctx(t), js))
	waitPG(t, ns, "burst", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Spec.MinResources != nil && pg.Spec.MinResources.Cpu().Cmp(q(fmt.Sprint(pods))) == 0
	})

	before, start := reconciles(t), time.Now()
	framework.Parallel(t, 16, pods, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("burst-workers-0-%d", i), Labels: map[string]string{
				jobsetv1alpha2.JobSetNameKey: "burst", jobsetv1alpha2.JobSetUIDKey: string(js.UID), jobsetv1alpha2.ReplicatedJobNameKey: "workers"}},
			Spec: corev1.PodSpec{SchedulerName: js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("2")}}}}},
		}
		return env.Client.Create(ctx(t), p)
	})
	waitPG(t, ns, "burst", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Spec.MinResources != nil && pg.Spec.MinResources.Cpu().Cmp(q(fmt.Sprint(2*pods))) == 0
	})
	passes, took := reconciles(t)-before, time.Since(start)
	t.Logf("%d pod creations priced in %.0f reconciles over %s", pods, passes, took)
	// One pass per batch, one more for the PodGroup event of each price written, and two for a batch
	// cut by the end; a slow machine spreads the creations over more batches.
	assert.LessOrEqual(t, passes, 2*math.Ceil(took.Seconds()/podgroup.PodEventBatch.Seconds())+2,
		"the pod events were not batched: one reconcile (a pass over every pod) per event")
}
