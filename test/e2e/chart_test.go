//go:build e2e

package e2e

// Chart mode (HYPERBATCH_E2E_INSTALL=chart: hyperbatch installed by `helm install charts/hyperbatch`,
// make run REAL_NODES=2 CHART=1): the manager's and the scheduler's leader pods are deleted under
// load, and the release is upgraded and uninstalled. Skipped in process mode.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// The chart's leader-election Leases (cmd/manager/run.go; the scheduler's ConfigMap).
const (
	managerLease   = "hyperbatch-manager.hyperbatch.dev"
	schedulerLease = "hyperbatch-scheduler"
)

// leaderPod is the release pod holding lease ("<pod>_<uuid>", as controller-runtime and kube-scheduler
// write the holder), or "" while no live pod of the release holds it.
func leaderPod(ctx context.Context, lease string) (string, error) {
	var l coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: e2efw.ChartNamespace, Name: lease}, &l); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	// A released Lease (a leader's clean shutdown) has an empty holder.
	name, _, _ := strings.Cut(ptr.Deref(l.Spec.HolderIdentity, ""), "_")
	if name == "" {
		return "", nil
	}
	var p corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: e2efw.ChartNamespace, Name: name}, &p); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil || p.Labels["app.kubernetes.io/instance"] != e2efw.ChartRelease {
		return "", nil
	}
	return name, nil
}

func currentLeader(t *testing.T, lease string) string {
	t.Helper()
	var leader string
	e2efw.Poll(t, 60*time.Second, "a live pod of the release holding Lease "+lease, func(ctx context.Context) (bool, error) {
		var err error
		leader, err = leaderPod(ctx, lease)
		return leader != "", err
	})
	return leader
}

// deleteLeader deletes the pod holding lease (graceful, as a drain or a rollout would) and returns it,
// the moment of the deletion, the new leader and how long the Lease took to reach it.
func deleteLeader(t *testing.T, lease string) (old string, deleted time.Time, leader string, failover time.Duration) {
	t.Helper()
	old = currentLeader(t, lease)
	deleted = time.Now()
	require.NoError(t, c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e2efw.ChartNamespace, Name: old}}))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		l, err := leaderPod(ctx, lease)
		require.NoError(t, err)
		if l != "" && l != old {
			return old, deleted, l, time.Since(deleted)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no other pod took Lease %s within 90 s of deleting its holder %s", lease, old)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitDeploymentReady waits until the Deployment's rollout is complete: every replica updated and
// Ready, and no pod of the release's component other than those (a deleted pod is gone), within 3
// minutes.
func waitDeploymentReady(t *testing.T, name string) {
	t.Helper()
	e2efw.Poll(t, 3*time.Minute, "Deployment "+name+" to have every replica updated and Ready", func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: e2efw.ChartNamespace, Name: name}, &d); err != nil {
			return false, err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
			return false, nil
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(e2efw.ChartNamespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, err
		}
		return int32(len(pods.Items)) == want, nil
	})
}

// streamPod is a bare Pod no node takes (it stays Pending): the stream's Pods only test admission.
func streamPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "stream-", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"hyperbatch.dev/e2e-nowhere": "true"},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers:                    []corev1.Container{{Name: "c", Image: e2efw.Workload().Image}},
		},
	}
}

// governedNamespaces creates a WorkloadPolicy defaulting the queue of Pods in namespaces and waits until
// the manager opted each in to the Pod webhook and a Pod there is defaulted (the webhook reads
// policies from an informer). It returns the policy's name.
func governedNamespaces(t *testing.T, queue string, namespaces ...string) string {
	t.Helper()
	ctx := context.Background()
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "chart-" + namespaces[0]}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces}}},
		Defaults: hbv1.PolicyDefaults{Queue: queue},
	}}
	require.NoError(t, c.Create(ctx, p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	for _, ns := range namespaces {
		e2efw.Poll(t, 60*time.Second, "the manager to opt namespace "+ns+" in to the Pod webhook", func(ctx context.Context) (bool, error) {
			var n corev1.Namespace
			if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
				return false, err
			}
			return n.Labels[hbv1.PodWebhookLabel] == hbv1.PodWebhookLabelEnabled, nil
		})
		e2efw.Poll(t, 60*time.Second, "a Pod in "+ns+" defaulted by the webhook", func(ctx context.Context) (bool, error) {
			pod := streamPod(ns)
			if err := c.Create(ctx, pod); err != nil {
				return false, err
			}
			return pod.Annotations[defaults.QueueNameAnnotation] == queue, nil
		})
	}
	return p.Name
}

type streamed struct {
	name, queue string
	at          time.Time
	err         error
}

// The manager's leader pod is deleted while Pods are created 10 a second in a governed namespace:
// the other replica goes on serving the webhook behind the Service and takes the Lease; every Pod
// created before, during and after the failover carries the policy's defaults (the Pod webhook's
// failurePolicy is Ignore, so a call that failed would have let a Pod through without them).
func TestChartManagerFailoverKeepsPodDefaults(t *testing.T) {
	e2efw.SkipUnlessChart(t, "it deletes the manager's leader pod")
	ns := primary.Namespace(t)
	queue := "failover-" + ns
	policy := governedNamespaces(t, queue, ns)

	var (
		mu   sync.Mutex
		got  []streamed
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pod := streamPod(ns)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := c.Create(ctx, pod)
			cancel()
			mu.Lock()
			got = append(got, streamed{name: pod.Name, queue: pod.Annotations[defaults.QueueNameAnnotation], at: time.Now(), err: err})
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	e2efw.Poll(t, 30*time.Second, "the stream to create 10 Pods", func(context.Context) (bool, error) { return count() >= 10, nil })

	old, deleted, leader, failover := deleteLeader(t, managerLease)
	// The new leader runs the controllers: a new policy's status is written (workloadpolicy controller).
	probe := builders.MakePolicy("chart-probe-" + ns).Obj()
	probe.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "chart-probe-" + ns}}
	require.NoError(t, c.Create(context.Background(), probe))
	t.Cleanup(func() { _ = c.Delete(context.Background(), probe) })
	e2efw.Poll(t, 60*time.Second, "the new leader to write a new policy's status", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(probe), probe); err != nil {
			return false, err
		}
		return probe.Status.ObservedGeneration == probe.Generation, nil
	})
	controllers := time.Since(deleted)
	waitDeploymentReady(t, "hyperbatch-manager")
	replaced := time.Since(deleted)
	n := count()
	e2efw.Poll(t, 30*time.Second, "30 more Pods after the replacement pod is Ready", func(context.Context) (bool, error) { return count() >= n+30, nil })
	close(stop)
	<-done

	var missed []string
	during := 0
	for _, s := range got {
		if !s.at.Before(deleted) && s.at.Before(deleted.Add(replaced)) {
			during++
		}
		switch {
		case s.err != nil:
			missed = append(missed, fmt.Sprintf("create at +%s: %v", s.at.Sub(deleted).Round(time.Millisecond), s.err))
		case s.queue != queue:
			missed = append(missed, fmt.Sprintf("%s created at +%s has queue %q", s.name, s.at.Sub(deleted).Round(time.Millisecond), s.queue))
		}
	}
	assert.Empty(t, missed, "of %d Pods streamed, these lack policy %s's defaults", len(got), policy)
	assert.Positive(t, during, "no Pod was created between the leader's deletion and its replacement's readiness")
	t.Logf("manager failover: leader %s deleted; %s held the Lease after %s, its controllers answered after %s, the replacement pod was Ready after %s; %d Pods streamed (%d in that window), %d without defaults",
		old, leader, failover.Round(time.Millisecond), controllers.Round(time.Millisecond), replaced.Round(time.Millisecond), len(got), during, len(missed))
}

// The scheduler's leader pod is deleted while 3 pods of a 4-pod gang wait for the 4th (PreEnqueue,
// Event GangWaiting): nothing is bound while the gang is incomplete or leaderless; the 4th pod arrives
// once another replica holds the Lease, and that replica binds the whole gang inside one tier-1
// HyperNode, where it runs to completion.
func TestChartSchedulerFailoverMidGang(t *testing.T) {
	e2efw.SkipUnlessChart(t, "it deletes the scheduler's leader pod")
	ctx := context.Background()
	ns := primary.Namespace(t)
	queue := "gangfail-" + ns
	openQueue(t, queue)
	nodes := e2efw.Workload()
	const size = 4
	pg := builders.MakePodGroup(ns, "gang").MinMember(size).Queue(queue).HardTier(1).Obj()
	require.NoError(t, c.Create(ctx, pg))

	// Every binding, as the watch sees it.
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		bound = map[string]time.Time{}
	)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Spec.NodeName == "" {
				continue
			}
			mu.Lock()
			if _, seen := bound[p.Name]; !seen {
				bound[p.Name] = time.Now()
			}
			mu.Unlock()
		}
	}()
	defer w.Stop()
	boundCount := func() int { mu.Lock(); defer mu.Unlock(); return len(bound) }

	pod := func(i int) *corev1.Pod {
		p := builders.MakeGangPod(ns, fmt.Sprintf("w-%d", i), pg.Name, "hyperbatch-scheduler").Image(nodes.Image).
			Requests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}).Obj()
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.AutomountServiceAccountToken = ptr.To(false)
		if !nodes.Simulated() {
			p.Spec.Containers[0].Args = []string{"--duration=5s"}
		}
		nodes.Apply(&p.Spec)
		return p
	}
	for i := 0; i < size-1; i++ {
		require.NoError(t, c.Create(ctx, pod(i)))
	}
	// The manager's podgroupstatus controller enqueues a PodGroup once it has pods.
	e2efw.Poll(t, 60*time.Second, "the PodGroup to be enqueued", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pg), pg); err != nil {
			return false, err
		}
		return pg.Status.Phase == schedulingv1beta1.PodGroupInqueue, nil
	})
	e2efw.Poll(t, 60*time.Second, "the leader to report the gang waiting for its 4th pod (Event GangWaiting)", func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == gangcontract.ReasonGangWaiting && e.InvolvedObject.Name == pg.Name {
				return true, nil
			}
		}
		return false, nil
	})
	require.Zero(t, boundCount(), "pods of the incomplete gang were bound")

	old, deleted, leader, failover := deleteLeader(t, schedulerLease)
	require.Zero(t, boundCount(), "pods of the incomplete gang were bound during the failover")
	last := pod(size - 1)
	// Taken before the create: the new leader may bind the gang, and the watch report it, before
	// Create returns (seen on real nodes: bound 30-281 µs before a time.Now() after Create).
	lastAt := time.Now()
	require.NoError(t, c.Create(ctx, last))

	var pods corev1.PodList
	want := corev1.PodSucceeded
	if nodes.Simulated() {
		want = corev1.PodRunning
	}
	e2efw.Poll(t, 3*time.Minute, fmt.Sprintf("the %d pods to be bound and %s", size, want), func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodFailed {
				return false, fmt.Errorf("pod %s failed on %s: %s", p.Name, p.Spec.NodeName, p.Status.Message)
			}
			if p.Status.Phase == want {
				n++
			}
		}
		return len(pods.Items) == size && n == size, nil
	})
	mu.Lock()
	var firstBound, lastBound time.Time
	for name, at := range bound {
		assert.False(t, at.Before(lastAt), "pod %s was bound %s before the gang's last pod existed", name, lastAt.Sub(at))
		if firstBound.IsZero() || at.Before(firstBound) {
			firstBound = at
		}
		if at.After(lastBound) {
			lastBound = at
		}
	}
	mu.Unlock()

	// One tier-1 HyperNode holds the gang, and the new leader bound all of it.
	tree := readHyperNodeTree(t)
	onNodes := map[string]bool{}
	for _, p := range pods.Items {
		onNodes[p.Spec.NodeName] = true
	}
	var leaves []string
	for name, members := range tree.nodes {
		inside := tree.tier[name] == 1
		for n := range onNodes {
			inside = inside && members[n]
		}
		if inside {
			leaves = append(leaves, name)
		}
	}
	assert.Len(t, leaves, 1, "the gang's nodes %v must lie inside one tier-1 HyperNode", onNodes)
	var evs corev1.EventList
	e2efw.Poll(t, 60*time.Second, fmt.Sprintf("%d Scheduled Events", size), func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		n := 0
		for _, e := range evs.Items {
			if e.Reason == "Scheduled" && e.InvolvedObject.Kind == "Pod" {
				n++
			}
		}
		return n >= size, nil
	})
	for _, e := range evs.Items {
		assert.NotEqual(t, gangcontract.ReasonGangPartlyBound, e.Reason, "Event %s: %s", e.Reason, e.Message)
		if e.Reason == "Scheduled" && e.InvolvedObject.Kind == "Pod" {
			// kube-scheduler's Events name the replica: reportingInstance <scheduler name>-<hostname>.
			assert.Equal(t, "hyperbatch-scheduler-"+leader, e.ReportingInstance, "pod %s was bound by another replica than the new leader", e.InvolvedObject.Name)
		}
	}
	t.Logf("scheduler failover: leader %s deleted with 3 of 4 gang pods waiting; %s held the Lease after %s; the 4th pod came at +%s and the gang was bound at +%s..+%s (all %d by %s, in %v), then ran to %s",
		old, leader, failover.Round(time.Millisecond), lastAt.Sub(deleted).Round(time.Millisecond), firstBound.Sub(deleted).Round(time.Millisecond),
		lastBound.Sub(deleted).Round(time.Millisecond), size, leader, leaves, want)
}

// helmOK runs helm and fails the test on an error, with helm's output.
func helmOK(t *testing.T, args ...string) string {
	t.Helper()
	out, err := primary.Helm(args...)
	require.NoError(t, err, "helm %s:\n%s", strings.Join(args, " "), out)
	return out
}

// `helm upgrade` with a changed value (excludedNamespaces) rolls the manager's pods, and the new pods leave the excluded namespace alone while the other stays governed; then
// `helm uninstall` removes every object of the release: no webhook configuration or admission policy
// is left, and a Pod and a PodGroup (whose hyperbatch webhooks were fail-closed) are created in the
// formerly governed namespace. What stays is what the pods made at run time in the release namespace
// (the two leader-election Leases and the webhook certificate Secret; docs/development.md). The
// release is installed again at the end, with the values it had.
func TestChartUpgradeThenUninstall(t *testing.T) {
	e2efw.SkipUnlessChart(t, "it upgrades and uninstalls the release, then installs it again")
	ctx := context.Background()
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(helmOK(t, "get", "values", e2efw.ChartRelease, "-n", e2efw.ChartNamespace, "-o", "yaml")), 0o600))
	reinstalled := false
	t.Cleanup(func() {
		if !reinstalled {
			out, err := primary.Helm("install", e2efw.ChartRelease, e2efw.ChartDir(), "-n", e2efw.ChartNamespace, "--values", values)
			t.Logf("reinstalling the release after a failure: %v\n%s", err, out)
		}
	})
	ns := primary.Namespace(t)
	excluded := primary.Namespace(t)
	queue := "upgrade-" + ns
	governedNamespaces(t, queue, ns, excluded)

	// Upgrade: the excluded namespace is left alone by the new manager pods.
	helmOK(t, "upgrade", e2efw.ChartRelease, e2efw.ChartDir(), "-n", e2efw.ChartNamespace, "--values", values, "--set", "excludedNamespaces={"+excluded+"}")
	waitDeploymentReady(t, "hyperbatch-manager")
	var mgrPods corev1.PodList
	require.NoError(t, c.List(ctx, &mgrPods, client.InNamespace(e2efw.ChartNamespace), client.MatchingLabels{"app.kubernetes.io/component": "manager"}))
	for _, p := range mgrPods.Items {
		require.Contains(t, p.Spec.Containers[0].Args, "--excluded-namespaces="+excluded, "manager pod %s runs without the upgraded value", p.Name)
	}
	// Positive signal first: the new pods default Pods in the governed namespace.
	e2efw.Poll(t, 60*time.Second, "the upgraded manager to default a Pod in "+ns, func(ctx context.Context) (bool, error) {
		pod := streamPod(ns)
		if err := c.Create(ctx, pod); err != nil {
			return false, err
		}
		return pod.Annotations[defaults.QueueNameAnnotation] == queue, nil
	})
	left := streamPod(excluded)
	require.NoError(t, c.Create(ctx, left))
	assert.Empty(t, left.Annotations[defaults.QueueNameAnnotation], "a Pod in the excluded namespace %s was defaulted after the upgrade", excluded)

	// Uninstall: helm waits until the objects are gone.
	begin := time.Now()
	helmOK(t, "uninstall", e2efw.ChartRelease, "-n", e2efw.ChartNamespace, "--wait", "--timeout", "3m")
	e2efw.Poll(t, 2*time.Minute, "the release's pods to be gone", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := c.List(ctx, &pods, client.InNamespace(e2efw.ChartNamespace), client.MatchingLabels{"app.kubernetes.io/instance": e2efw.ChartRelease})
		return err == nil && len(pods.Items) == 0, err
	})
	t.Logf("helm uninstall and the pods gone in %s", time.Since(begin).Round(100*time.Millisecond))

	// No admission object of hyperbatch is left anywhere.
	out, err := primary.Kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,mutatingadmissionpolicies,mutatingadmissionpolicybindings,clusterroles,clusterrolebindings,priorityclasses", "-o", "name")
	require.NoError(t, err, out)
	for _, name := range strings.Fields(out) {
		assert.NotContains(t, name, "hyperbatch", "left behind by helm uninstall")
	}
	out, err = primary.Kubectl("get", "all,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets,leases", "-A", "-l", "app.kubernetes.io/instance="+e2efw.ChartRelease, "-o", "name")
	require.NoError(t, err, out)
	assert.Empty(t, strings.TrimSpace(out), "objects of the release left behind")
	out, err = primary.Kubectl("get", "all,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets,leases", "-n", e2efw.ChartNamespace, "-o", "name")
	require.NoError(t, err, out)
	var rest []string
	for _, name := range strings.Fields(out) {
		switch name {
		case "configmap/kube-root-ca.crt", "serviceaccount/default", // every namespace's
			"secret/hyperbatch-webhook-tls",               // written by the manager's certificate rotator
			"lease.coordination.k8s.io/" + managerLease,   // leader election, written by the manager
			"lease.coordination.k8s.io/" + schedulerLease: // and by kube-scheduler
		default:
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	assert.Empty(t, rest, "left behind in %s by helm uninstall", e2efw.ChartNamespace)
	releases := helmOK(t, "list", "-n", e2efw.ChartNamespace, "-q")
	assert.Empty(t, strings.TrimSpace(releases), "helm still lists a release")

	// Nothing blocks Pods, nor PodGroups, in the formerly governed namespace.
	p := streamPod(ns)
	require.NoError(t, c.Create(ctx, p), "a Pod in the formerly governed namespace %s after helm uninstall", ns)
	assert.Empty(t, p.Annotations[defaults.QueueNameAnnotation], "defaulted with no hyperbatch installed")
	require.NoError(t, c.Create(ctx, builders.MakePodGroup(ns, "after-uninstall").Obj()), "a PodGroup after helm uninstall (hyperbatch's PodGroup webhooks were fail-closed)")

	// Install again, as the cluster was: every component Ready and the webhook answering.
	begin = time.Now()
	helmOK(t, "install", e2efw.ChartRelease, e2efw.ChartDir(), "-n", e2efw.ChartNamespace, "--values", values)
	reinstalled = true
	for _, d := range []string{"hyperbatch-manager", "hyperbatch-scheduler"} {
		waitDeploymentReady(t, d)
	}
	for _, l := range []string{managerLease, schedulerLease} {
		currentLeader(t, l)
	}
	e2efw.Poll(t, 60*time.Second, "the reinstalled webhook to admit a PodGroup", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, builders.MakePodGroup(ns, "after-reinstall").Obj(), client.DryRunAll)
		return err == nil, nil
	})
	e2efw.Poll(t, 60*time.Second, "the reinstalled manager to default a Pod in "+ns, func(ctx context.Context) (bool, error) {
		pod := streamPod(ns)
		if err := c.Create(ctx, pod); err != nil {
			return false, err
		}
		return pod.Annotations[defaults.QueueNameAnnotation] == queue, nil
	})
	t.Logf("helm install again: every component Ready and the webhook defaulting Pods %s after helm install began", time.Since(begin).Round(100*time.Millisecond))
}
