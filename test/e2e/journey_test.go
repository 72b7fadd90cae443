//go:build e2e

package e2e

// The journeys: a user's manifest that names no queue, priority or scheduler, applied with kubectl to a
// cluster that runs hyperbatch next to Volcano's controllers and webhooks and the JobSet controller (the
// local cluster starts them; see hack/localcluster/neighbours.go), followed to its deletion.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// ensureQueue creates an Open Volcano Queue (Volcano's job validation refuses Jobs whose queue is
// missing or not Open) and waits until Volcano's queue controller reports it Open.
func ensureQueue(t *testing.T, name string) {
	t.Helper()
	q := builders.MakeQueue(name).Obj()
	if err := c.Create(context.Background(), q); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create Volcano Queue %s: %v", name, err)
	}
	e2efw.Poll(t, 60*time.Second, "Volcano's queue controller to open queue "+name, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, q); err != nil {
			return false, err
		}
		return q.Status.State == schedulingv1beta1.QueueStateOpen, nil
	})
}

// openQueue is ensureQueue for one test: the Queue is deleted when the test ends.
func openQueue(t *testing.T, name string) {
	t.Helper()
	ensureQueue(t, name)
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

// startVolcanoScheduler runs Volcano's scheduler for one test (its log's tail is printed when the
// test fails).
func startVolcanoScheduler(t *testing.T) *framework.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vs, err := framework.StartVolcanoScheduler(ctx, framework.NeighbourOptions{Kubeconfig: primary.Kubeconfig, LogDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(vs.LogTail(40))
		}
		assert.NoError(t, vs.Stop())
	})
	return vs
}

// scheduledBy counts the namespace's Scheduled Events of pods by the component that wrote them.
func scheduledBy(t *testing.T, ns string) map[string]int {
	t.Helper()
	var events corev1.EventList
	require.NoError(t, c.List(context.Background(), &events, client.InNamespace(ns)))
	out := map[string]int{}
	for _, e := range events.Items {
		if e.Reason == "Scheduled" && e.InvolvedObject.Kind == "Pod" {
			by := e.ReportingController
			if by == "" {
				by = e.Source.Component
			}
			out[by]++
		}
	}
	return out
}

// waitScheduledBy waits until the namespace holds want Scheduled Events of pods (the schedulers record
// them asynchronously, so they may arrive after the workload has finished), then asserts that all of
// them are by scheduler.
func waitScheduledBy(t *testing.T, ns, scheduler string, want int) {
	t.Helper()
	var got map[string]int
	e2efw.Poll(t, 60*time.Second, fmt.Sprintf("%d Scheduled Events by %s", want, scheduler), func(context.Context) (bool, error) {
		got = scheduledBy(t, ns)
		total := 0
		for _, n := range got {
			total += n
		}
		return total >= want, nil
	})
	assert.Equal(t, map[string]int{scheduler: want}, got, "Scheduled events by component")
}

// journeyPolicy creates a WorkloadPolicy for ns and returns its name.
func journeyPolicy(t *testing.T, ns string, d hbv1.PolicyDefaults) string {
	t.Helper()
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "journey-" + ns}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Defaults:          d,
	}}
	require.NoError(t, c.Create(context.Background(), p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	e2efw.Poll(t, 30*time.Second, "the manager to observe the policy", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.MatchingNamespaces == 1, nil
	})
	return p.Name
}

// applyUntilDefaulted applies manifest with the project's kubectl until the object carries the
// defaulted-by annotation naming policy (the webhook reads policies from an informer, so the first
// apply may race the new policy); a stale object is deleted before the retry.
func applyUntilDefaulted(t *testing.T, manifest, policy string, obj client.Object) {
	t.Helper()
	e2efw.Poll(t, 60*time.Second, "kubectl apply to be defaulted by policy "+policy, func(ctx context.Context) (bool, error) {
		if out, err := primary.Kubectl("apply", "-f", manifest); err != nil {
			return false, fmt.Errorf("kubectl apply: %w: %s", err, out)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		if strings.Contains(obj.GetAnnotations()[hbv1.DefaultedByAnnotation], policy) {
			return true, nil
		}
		_, _ = primary.Kubectl("delete", "-f", manifest, "--wait")
		return false, nil
	})
}

// workloadTemplate is a one-container pod template on the run's workload nodes, running its image
// (e2efw.Workload: kwok nodes by default, real nodes with HYPERBATCH_E2E_NODES=real).
func workloadTemplate(container string) *builders.PodTemplateWrapper {
	n := e2efw.Workload()
	w := builders.MakePodTemplate(container, n.Image)
	n.Apply(&w.Spec)
	return w
}

func writeManifest(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// volcanoJobManifest is 1 master + 8 workers; no queue, priority or scheduler.
func volcanoJobManifest(t *testing.T, ns, name string) string {
	t.Helper()
	task := func(n string) corev1.PodTemplateSpec {
		return workloadTemplate(n).
			Request(corev1.ResourceCPU, "100m").Request(corev1.ResourceMemory, "64Mi").Obj()
	}
	m, err := builders.MakeVolcanoJob(ns, name).MinAvailable(9).Task("master", 1, task("master")).Task("worker", 8, task("worker")).Manifest()
	require.NoError(t, err)
	return m
}

// leafOf maps each node to its tier-1 HyperNode.
func leafOf(t *testing.T) map[string]string {
	t.Helper()
	var hns topologyv1alpha1.HyperNodeList
	require.NoError(t, c.List(context.Background(), &hns))
	out := map[string]string{}
	for _, h := range hns.Items {
		if h.Spec.Tier != 1 {
			continue
		}
		for _, m := range h.Spec.Members {
			if m.Type == topologyv1alpha1.MemberTypeNode && m.Selector.ExactMatch != nil {
				out[m.Selector.ExactMatch.Name] = h.Name
			}
		}
	}
	require.NotEmpty(t, out, "no tier-1 HyperNode lists nodes by exactMatch")
	return out
}

// volcanoJobRecord is what a watch opened before a Volcano Job was created saw of it in its
// namespace: its PodGroups' minMember, its pods' nodes and its phases. Volcano's job controller
// deletes the PodGroup as soon as the Job completes, and kwok completes pods at once, so polling
// could miss a PodGroup that lived for a second; a watch cannot.
type volcanoJobRecord struct {
	job       string
	mu        sync.Mutex
	minMember []int32
	nodes     map[string]string // pod -> node, once bound
	phases    map[batchv1alpha1.JobPhase]string
	// exits is each pod's container as it terminated: "<container ID> exit <code>" (real nodes
	// only; kwok reports no container).
	exits map[string]string
}

// recordVolcanoJob opens watches on PodGroups, Pods and Volcano Jobs in ns before anything is
// created there, and records what they show of the Volcano Job named job.
func recordVolcanoJob(t *testing.T, ns, job string) *volcanoJobRecord {
	t.Helper()
	r := &volcanoJobRecord{job: job, nodes: map[string]string{}, phases: map[batchv1alpha1.JobPhase]string{}, exits: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, list := range []client.ObjectList{&schedulingv1beta1.PodGroupList{}, &corev1.PodList{}, &batchv1alpha1.JobList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		require.NoError(t, err, "watching %T in %s", list, ns)
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				r.see(ev.Object)
			}
		}()
	}
	return r
}

func (r *volcanoJobRecord) see(obj runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *schedulingv1beta1.PodGroup:
		for _, ref := range o.OwnerReferences {
			if ref.Kind == "Job" && ref.Name == r.job {
				r.minMember = append(r.minMember, o.Spec.MinMember)
			}
		}
	case *corev1.Pod:
		if o.Labels[batchv1alpha1.JobNameKey] == r.job && o.Spec.NodeName != "" {
			r.nodes[o.Name] = o.Spec.NodeName
		}
		if o.Labels[batchv1alpha1.JobNameKey] == r.job {
			for _, cs := range o.Status.ContainerStatuses {
				if cs.State.Terminated != nil {
					r.exits[o.Name] = fmt.Sprintf("%s exit %d", cs.ContainerID, cs.State.Terminated.ExitCode)
				}
			}
		}
	case *batchv1alpha1.Job:
		if o.Name == r.job && o.Status.State.Phase != "" {
			r.phases[o.Status.State.Phase] = o.Status.State.Message
		}
	}
}

// followVolcanoJob waits until the record shows that Volcano's job controller made the PodGroup
// (minMember 9) and 9 pods, all bound, and that the Job ended Completed; it returns the pods' nodes.
func followVolcanoJob(t *testing.T, r *volcanoJobRecord) []string {
	t.Helper()
	check := func(what string, timeout time.Duration, done func() (bool, error)) {
		e2efw.Poll(t, timeout, what, func(context.Context) (bool, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return done()
		})
	}
	check("Volcano's job controller to create the PodGroup", 60*time.Second, func() (bool, error) {
		return slices.Contains(r.minMember, 9), nil
	})
	check("the 9 pods to be created and bound", 3*time.Minute, func() (bool, error) { return len(r.nodes) == 9, nil })
	check("the Volcano Job to be Completed", 3*time.Minute, func() (bool, error) {
		for _, bad := range []batchv1alpha1.JobPhase{batchv1alpha1.Failed, batchv1alpha1.Aborted} {
			if msg, ok := r.phases[bad]; ok {
				return false, fmt.Errorf("job ended %s: %s", bad, msg)
			}
		}
		_, ok := r.phases[batchv1alpha1.Completed]
		return ok, nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	set := map[string]bool{}
	for _, n := range r.nodes {
		set[n] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Journey (a): a Volcano Job for hyperbatch-scheduler. The policy's defaults and Volcano's are applied,
// Volcano's job controller creates the PodGroup and pods once hyperbatch's PodGroup controller enqueues
// the gang, hyperbatch-scheduler places all 9 pods inside one tier-1 HyperNode, kwok completes them, the
// Job ends Completed and Volcano's gc deletes it after the policy's ttlSecondsAfterFinished.
func TestJourneyVolcanoJobOnHyperbatchScheduler(t *testing.T) {
	ns := primary.Namespace(t)
	queue := "journey-" + ns
	openQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{
		Queue: queue, SchedulerName: "hyperbatch-scheduler", TTLSecondsAfterFinished: ptr.To[int32](5),
		NetworkTopology: &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyMode("hard"), HighestTierAllowed: ptr.To[int32](1)},
	})
	record := recordVolcanoJob(t, ns, "train")
	manifest := writeManifest(t, volcanoJobManifest(t, ns, "train"))
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}}
	applyUntilDefaulted(t, manifest, policy, job)

	// Our defaults ...
	assert.Equal(t, queue, job.Spec.Queue)
	assert.Equal(t, "hyperbatch-scheduler", job.Spec.SchedulerName)
	if assert.NotNil(t, job.Spec.TTLSecondsAfterFinished) {
		assert.Equal(t, int32(5), *job.Spec.TTLSecondsAfterFinished)
	}
	// ... and Volcano's (its mutating webhook fills every task's minAvailable and maxRetry).
	for _, task := range job.Spec.Tasks {
		if assert.NotNil(t, task.MinAvailable, "task %s: Volcano's mutating webhook did not run", task.Name) {
			assert.Equal(t, task.Replicas, *task.MinAvailable, "task %s minAvailable", task.Name)
		}
	}
	assert.Equal(t, int32(3), job.Spec.MaxRetry, "Volcano's default maxRetry")

	nodes := followVolcanoJob(t, record)
	if !e2efw.Workload().Simulated() {
		// On real nodes every pod's worker ran in containerd and exited 0.
		record.mu.Lock()
		exits := maps.Clone(record.exits)
		record.mu.Unlock()
		assert.Len(t, exits, 9, "terminated containers seen: %v", exits)
		for pod, e := range exits {
			assert.Regexp(t, `^containerd://[0-9a-f]+ exit 0$`, e, "pod %s", pod)
		}
	}
	leaves := leafOf(t)
	set := map[string]bool{}
	for _, n := range nodes {
		set[leaves[n]] = true
	}
	assert.Len(t, set, 1, "the gang's nodes %v lie in tier-1 HyperNodes %v, want one", nodes, set)
	assert.NotContains(t, set, "", "a node of the gang is in no tier-1 HyperNode")

	primary.WaitDeleted(t, job, "Volcano's gc to delete the Job after ttlSecondsAfterFinished=5", 90*time.Second)
}

// Journey (c): the same Volcano Job for Volcano's own scheduler. The policy gives only queue and TTL;
// Volcano's mutating webhook fills schedulerName "volcano", and Volcano's scheduler (started here with
// the configuration of Volcano's chart) places the gang. Our defaults serve Volcano's scheduler's users.
func TestJourneyVolcanoJobOnVolcanoScheduler(t *testing.T) {
	vs := startVolcanoScheduler(t)
	ns := primary.Namespace(t)
	queue := "journey-" + ns
	openQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{Queue: queue, TTLSecondsAfterFinished: ptr.To[int32](5)})
	record := recordVolcanoJob(t, ns, "train")
	manifest := writeManifest(t, volcanoJobManifest(t, ns, "train"))
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}}
	applyUntilDefaulted(t, manifest, policy, job)
	assert.Equal(t, queue, job.Spec.Queue)
	assert.Equal(t, "volcano", job.Spec.SchedulerName, "Volcano's mutating webhook fills its own scheduler")

	followVolcanoJob(t, record)
	require.False(t, vs.Exited(), "vc-scheduler exited.\n%s", vs.LogTail(40))
	waitScheduledBy(t, ns, "volcano", 9)
	primary.WaitDeleted(t, job, "Volcano's gc to delete the Job after ttlSecondsAfterFinished=5", 90*time.Second)
}

// Journey (b): a JobSet with two replicatedJobs. The policy's scheduler, queue and TTL are filled, the
// JobSet controller creates the Jobs, kube-controller-manager the pods, hyperbatch-scheduler binds
// them, kwok completes them, the JobSet ends Completed and the JobSet controller deletes it after its
// TTL. (Gang placement of a JobSet: jobsetgang_test.go; here: defaults and scheduling.)
func TestJourneyJobSet(t *testing.T) {
	ns := primary.Namespace(t)
	queue := "journey-" + ns
	openQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{
		Queue: queue, SchedulerName: "hyperbatch-scheduler", TTLSecondsAfterFinished: ptr.To[int32](5)})
	nodes := e2efw.Workload()
	rj := func(name string, pods int) string {
		return fmt.Sprintf(`  - name: %s
    replicas: 1
    template:
      spec:
        parallelism: %d
        completions: %d
        template:
          spec:
            restartPolicy: Never
%s            containers:
            - name: %s
              image: %s
              resources: {requests: {cpu: 100m, memory: 64Mi}}
`, name, pods, pods, nodes.PodSpecYAML(12), name, nodes.Image)
	}
	manifest := writeManifest(t, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: pipeline
  namespace: %s
spec:
  replicatedJobs:
%s%s`, ns, rj("driver", 1), rj("workers", 3)))
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pipeline"}}
	applyUntilDefaulted(t, manifest, policy, js)
	assert.Equal(t, queue, js.Annotations[defaults.QueueNameAnnotation])
	if assert.NotNil(t, js.Spec.TTLSecondsAfterFinished) {
		assert.Equal(t, int32(5), *js.Spec.TTLSecondsAfterFinished)
	}
	for _, r := range js.Spec.ReplicatedJobs {
		assert.Equal(t, "hyperbatch-scheduler", r.Template.Spec.Template.Spec.SchedulerName, "replicatedJob %s", r.Name)
	}
	// JobSet's own mutating webhook ran too: it defaults the success policy.
	if assert.NotNil(t, js.Spec.SuccessPolicy, "JobSet's mutating webhook did not run") {
		assert.Equal(t, jobsetv1alpha2.OperatorAll, js.Spec.SuccessPolicy.Operator)
	}

	e2efw.Poll(t, 3*time.Minute, "the JobSet to be Completed", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
			return false, err
		}
		for _, cond := range js.Status.Conditions {
			if cond.Type == string(jobsetv1alpha2.JobSetFailed) && cond.Status == metav1.ConditionTrue {
				return false, fmt.Errorf("JobSet failed: %s", cond.Message)
			}
			if cond.Type == string(jobsetv1alpha2.JobSetCompleted) && cond.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	waitScheduledBy(t, ns, "hyperbatch-scheduler", 4)
	primary.WaitDeleted(t, js, "the JobSet controller to delete the JobSet after ttlSecondsAfterFinished=5", 90*time.Second)
}
