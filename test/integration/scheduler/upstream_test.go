package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/hypertopology"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// upstreamWorkloadOptions turn the upstream Workload API (KEP-4671, scheduling.k8s.io Workload and
// PodGroup) on in the suite's kube-apiserver: the GenericWorkload gate (pods' spec.schedulingGroup),
// WorkloadWithJob (Jobs get a Workload and PodGroup from the Job controller) and the API version the
// minor serves (alpha v1alpha2 in 1.36; beta v1beta1, still off by default, in 1.37).
func upstreamWorkloadOptions(minor int) (framework.Options, error) {
	version, err := upstreamSchedulingVersion(minor)
	if err != nil {
		return framework.Options{}, err
	}
	return framework.Options{
		FeatureGates:  map[string]bool{"GenericWorkload": true, "WorkloadWithJob": true},
		RuntimeConfig: map[string]string{"scheduling.k8s.io/" + version: "true"},
	}, nil
}

func upstreamSchedulingVersion(minor int) (string, error) {
	switch {
	case minor == 36:
		return "v1alpha2", nil
	case minor >= 37:
		return "v1beta1", nil
	}
	return "", fmt.Errorf("kube-apiserver 1.%d: the scheduler suite runs on 1.36 and newer (docs/compatibility.md)", minor)
}

// A pod of an upstream pod group (spec.schedulingGroup) sent to hyperbatch-scheduler is refused,
// never bound alone: its PodScheduled condition and a FailedScheduling Event say why and what to use
// instead. A Volcano gang in the same namespace is placed as usual.
func TestUpstreamPodGroupPodIsRefused(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "upstreampod"
	ns := namespace(t, "t-upstreampod")
	buildTree(t, test, 1, 2)

	var pods []*corev1.Pod
	for i := range 2 {
		p := gangPod(test, ns, "up", fmt.Sprintf("up-%d", i))
		delete(p.Annotations, "scheduling.k8s.io/group-name")
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")}
		pods = append(pods, p)
	}
	podGroup(t, ns, "g", 2, hardTier(1))
	createPods(t, append(pods, gangPods(test, ns, "g", 2)...)...)

	// The apiserver kept the field (GenericWorkload is on), so the refusal below is about it.
	got, err := cs.CoreV1().Pods(ns).Get(ctxFor(t, 30*time.Second), "up-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.Spec.SchedulingGroup, "kube-apiserver dropped spec.schedulingGroup: is GenericWorkload on?")

	waitBound(t, ns, "g", 2, 30*time.Second)
	for _, p := range pods {
		waitRefused(t, ns, p.Name, "trainer")
	}
	require.Zero(t, bound(placements(t, ns, "up")), "a pod of an upstream pod group was bound")
}

// A batch Job that qualifies for the Job controller's Workload integration (WorkloadWithJob: Indexed,
// parallelism = completions > 1; on 1.37 also .spec.scheduling with a gang policy) gets a Workload and
// a PodGroup, and its pods name that PodGroup in spec.schedulingGroup. hyperbatch-scheduler refuses
// every one of them: no pod of the Job is bound, each says why.
func TestUpstreamJobWorkloadIsRefused(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "upstreamjob"
	ns := namespace(t, "t-upstreamjob")
	buildTree(t, test, 1, 2)

	kcm, err := framework.StartKubeControllerManagerWithFlags(env, []string{"--feature-gates=GenericWorkload=true,WorkloadWithJob=true"}, "job-controller")
	require.NoError(t, err)
	t.Cleanup(kcm.Stop)

	tmpl := gangPod(test, ns, "job", "")
	delete(tmpl.Annotations, "scheduling.k8s.io/group-name")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	podTemplate, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec})
	require.NoError(t, err)
	delete(podTemplate["metadata"].(map[string]any), "namespace")
	spec := map[string]any{
		"parallelism": int64(2), "completions": int64(2), "completionMode": "Indexed",
		"template": podTemplate,
	}
	if apiserverMinor >= 37 { // the Job API's own field (WorkloadWithJob) exists from 1.37
		spec["scheduling"] = map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(2)}}}
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"namespace": ns, "name": "trainer"},
		"spec":     spec,
	}}
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), job))
	if apiserverMinor >= 37 {
		_, found, _ := unstructured.NestedMap(job.Object, "spec", "scheduling", "schedulingPolicy", "gang")
		require.True(t, found, "kube-apiserver dropped the Job's .spec.scheduling: is WorkloadWithJob on?")
	}

	// The Job controller's pods, each naming the PodGroup it created.
	var pods []corev1.Pod
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "group=job"})
		if err != nil {
			t.Logf("listing the Job's pods (will retry): %v", err)
			return false, nil
		}
		pods = l.Items
		if len(pods) < 2 {
			return false, nil
		}
		for _, p := range pods {
			if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the Job controller did not create 2 pods with spec.schedulingGroup; kube-controller-manager log:\n%s", kcm.LogTail(4000))
	group := *pods[0].Spec.SchedulingGroup.PodGroupName

	version, err := upstreamSchedulingVersion(apiserverMinor)
	require.NoError(t, err)
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: version, Kind: "PodGroup"})
	require.NoError(t, env.Client.Get(ctxFor(t, 30*time.Second), client.ObjectKey{Namespace: ns, Name: group}, pg), "the Job's scheduling.k8s.io PodGroup %s", group)

	for _, p := range pods {
		waitRefused(t, ns, p.Name, group)
	}
	require.Zero(t, bound(placements(t, ns, "job")), "a pod of the Job's upstream pod group was bound")
}

// waitRefused waits until the pod's PodScheduled condition is False with hyperbatch-scheduler's
// refusal of the upstream pod group, and a FailedScheduling Event on the pod carries it too.
func waitRefused(t *testing.T, ns, pod, group string) {
	t.Helper()
	want := []string{hypertopology.ReasonUpstreamPodGroup, fmt.Sprintf("pod group %q", group), "Volcano PodGroup"}
	var cond, events string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Logf("getting pod %s (will retry): %v", pod, err)
			return false, nil
		}
		condOK := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				cond = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				condOK = c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && containsAll(c.Message, want)
			}
		}
		l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("listing events in %s (will retry): %v", ns, err)
			return false, nil
		}
		var notes []string
		eventOK := false
		for _, e := range l.Items {
			if e.Regarding.Kind != "Pod" || e.Regarding.Name != pod {
				continue
			}
			notes = append(notes, e.Reason+": "+e.Note)
			if e.Reason == "FailedScheduling" && containsAll(e.Note, want) {
				eventOK = true
			}
		}
		events = strings.Join(notes, " | ")
		return condOK && eventOK, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: want PodScheduled=False (Unschedulable) and a FailedScheduling Event with %q; condition %q, events %q", ns, pod, want, cond, events)
	}
}
