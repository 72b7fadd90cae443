package podgroupstatus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// A Volcano Job made by Volcano's real job controller, with its documented policy "PodEvicted →
// RestartJob", runs low-priority on a full rack; a high-priority hyperbatch gang needing the rack
// preempts it. The whole Job is evicted, Volcano's controller sees the eviction and restarts the Job
// (status.retryCount, phase Restarting), and the gang binds in the rack.
func TestVolcanoJobPreemptedAndRestarted(t *testing.T) {
	bin := volcanoControllerManager()
	if bin == "" {
		t.Fatal("Volcano's controller-manager binary is not built: run 'make test-tools', set HB_VC_CONTROLLER_MANAGER, or put vc-controller-manager in bin/")
	}
	dumpLogOnFailure(t)
	ctx := ctxFor(t, 30*time.Second)
	for name, v := range map[string]int32{"hb-vc-low": 100, "hb-vc-high": 1000} {
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, builders.PriorityClass(name, v), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	ns := namespace(t, "vcpre")
	rack(t, "vcpre", "vcpre-rack-0", 2) // 16 GPUs
	ensureRootQueue(t)
	vcQueue := queue(t, "vcpre-q", nil, "", "")
	startVolcano(t, bin)

	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), gpu: resource.MustParse("4")}
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "victim"},
		Spec: batchv1alpha1.JobSpec{SchedulerName: hb, Queue: vcQueue, MinAvailable: 4, PriorityClassName: "hb-vc-low",
			Policies:        []batchv1alpha1.LifecyclePolicy{{Event: busv1alpha1.PodEvictedEvent, Action: busv1alpha1.RestartJobAction}},
			NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)},
			Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 4, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"hb-test": "vcpre"},
				PriorityClassName:             "hb-vc-low",
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1",
					Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{gpu: req[gpu]}}}}}}}}}}
	require.NoError(t, env.Client.Create(ctx, job))

	jobPods := func(ctx context.Context) ([]corev1.Pod, error) {
		var l corev1.PodList
		if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []corev1.Pod
		for _, p := range l.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "Job" && ref.Name == "victim" {
				out = append(out, p)
			}
		}
		return out, nil
	}
	var first []corev1.Pod
	waitFor(t, 90*time.Second, "the Volcano Job's 4 pods bound", func(ctx context.Context) (bool, error) {
		pods, err := jobPods(ctx)
		if err != nil {
			return false, err
		}
		first = first[:0]
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				first = append(first, p)
			}
		}
		return len(first) == 4, nil
	})
	// Play the kubelet: the Job's pods run, so Volcano's Job is Running.
	for _, p := range first {
		cur, err := cs.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		cur.Status.Phase = corev1.PodRunning
		cur.Status.StartTime = ptr.To(metav1.Now())
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	waitFor(t, 60*time.Second, "the Volcano Job Running", func(ctx context.Context) (bool, error) {
		var j batchv1alpha1.Job
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &j)
		return err == nil && j.Status.State.Phase == batchv1alpha1.Running, err
	})

	// The urgent gang: 4 pods of 4 GPUs, high priority, in one rack.
	podGroup(t, ns, "urgent", pgOpts{queue: vcQueue, minMember: 4, topology: hardTier1()})
	for i := 0; i < 4; i++ {
		p := builders.MakeGangPod(ns, "urgent-"+string(rune('0'+i)), "urgent", hb).Label("group", "urgent").
			NodeSelector("hb-test", "vcpre").GPUs(4).PriorityClass("hb-vc-high").Obj()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitBound(t, ns, "urgent", 4)
	waitEvent(t, ns, "urgent", "GangPreempting", "to clear HyperNode vcpre-rack-0 (tier 1)")

	// Volcano's own controller saw the eviction and restarted the Job by its policy.
	waitFor(t, 60*time.Second, "Volcano's job controller to restart the Job (retryCount 1)", func(ctx context.Context) (bool, error) {
		var j batchv1alpha1.Job
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return false, err
		}
		return j.Status.RetryCount >= 1, nil
	})
	// None of the first pods is left: the Job was evicted whole.
	waitFor(t, 60*time.Second, "every pod of the Job's first run gone", func(ctx context.Context) (bool, error) {
		pods, err := jobPods(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			for _, f := range first {
				if p.UID == f.UID {
					return false, nil
				}
			}
		}
		return true, nil
	})
	var pgs schedulingv1beta1.PodGroupList
	require.NoError(t, env.Client.List(ctx, &pgs, client.InNamespace(ns)))
	for _, pg := range pgs.Items {
		if ref := metav1.GetControllerOf(&pg); ref != nil && ref.Kind == "Job" && ref.Name == "victim" {
			waitEvent(t, ns, pg.Name, "GangPreempted", "preempted by gang "+ns+"/urgent")
		}
	}
}
