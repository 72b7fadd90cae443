package podgroupstatus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// Volcano Jobs that set their GPUs only in limits, as the README's example does, under Volcano's
// real job and queue controllers: Volcano prices their PodGroups from the templates' requests, so
// minResources carries no GPU; hyperbatch's enqueue counts each pod's effective request (the limit,
// as Kubernetes defaults it), so a 16-GPU Queue admits two 8-GPU gangs and holds the third.
func TestLimitOnlyGPUsCountAgainstQueueCapability(t *testing.T) {
	bin := volcanoControllerManager()
	if bin == "" {
		t.Fatal("Volcano's controller-manager binary is not built: run 'make test-tools', set HB_VC_CONTROLLER_MANAGER, or put vc-controller-manager in bin/")
	}
	dumpLogOnFailure(t)
	ns := namespace(t, "limits")
	ensureRootQueue(t)
	capQ := queue(t, "limits-q", gpus(16), "", "")
	startVolcano(t, bin)

	pgOf := map[string]string{}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("train-%d", i)
		job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: batchv1alpha1.JobSpec{SchedulerName: hb, Queue: capQ, MinAvailable: 2,
				Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"hb-test": "limits-none"}, // never placed: the gangs keep their reservations
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
							Limits:   corev1.ResourceList{gpu: resource.MustParse("4")}}}}}}}}}}
		require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), job))
		// One at a time, so the queue order (oldest first) is the creation order.
		waitFor(t, 60*time.Second, "Volcano's job controller to create the PodGroup of "+name, func(ctx context.Context) (bool, error) {
			var l schedulingv1beta1.PodGroupList
			if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return false, err
			}
			for _, pg := range l.Items {
				if ref := metav1.GetControllerOf(&pg); ref != nil && ref.Kind == "Job" && ref.UID == job.UID {
					pgOf[name] = pg.Name
					// The premise: Volcano's minResources has no GPU.
					require.NotNil(t, pg.Spec.MinResources)
					_, hasGPU := (*pg.Spec.MinResources)[gpu]
					require.False(t, hasGPU, "Volcano's job controller put the limit-only GPUs in minResources %v: the premise of this test is gone", *pg.Spec.MinResources)
					return true, nil
				}
			}
			return false, nil
		})
		if i < 2 {
			waitPG(t, ns, pgOf[name], "Inqueue", phaseIs(schedulingv1beta1.PodGroupInqueue))
		}
	}
	pg := waitPG(t, ns, pgOf["train-2"], "Pending over the GPU capability", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupPending &&
			unschedulable(corev1.ConditionTrue, "QueueCapabilityExceeded", "nvidia.com/gpu: Inqueue and Running gangs reserve 16",
				"this gang's pods request 8", "total 24 > capability 16")(pg)
	})
	waitEvent(t, ns, pgOf["train-2"], "QueueCapabilityExceeded", fmt.Sprintf("queue %q", capQ), "total 24 > capability 16")
	assert.Equal(t, schedulingv1beta1.PodGroupPending, pg.Status.Phase)
	// Volcano creates pods only for an enqueued gang: the third Job has none.
	var pods corev1.PodList
	require.NoError(t, env.Client.List(ctxFor(t, 10*time.Second), &pods, client.InNamespace(ns)))
	for _, p := range pods.Items {
		assert.NotContains(t, p.Name, "train-2-", "the held gang's pods were created")
	}

	// The first gang goes (its Job, then its PodGroup: no garbage collector runs here): its
	// reservation goes and the third is admitted.
	require.NoError(t, env.Client.Delete(ctxFor(t, 30*time.Second), &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train-0"}}))
	require.NoError(t, env.Client.Delete(ctxFor(t, 30*time.Second), &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pgOf["train-0"]}}))
	waitPG(t, ns, pgOf["train-2"], "Inqueue once the first gang is gone", phaseIs(schedulingv1beta1.PodGroupInqueue))
}
