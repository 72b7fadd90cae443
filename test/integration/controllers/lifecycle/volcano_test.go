package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/internal/workload"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// startVolcanoJobController runs Volcano's controller-manager (volcano.sh/volcano v1.14.0-alpha.0,
// built by the neighbours' hack/tools into bin/vc-controller-manager) with its job and PodGroup
// controllers against the envtest apiserver. The test fails when the binary is not built (make test-tools builds it).
func startVolcanoJobController(t *testing.T) {
	t.Helper()
	bin := filepath.Join(framework.AssetsDir(), "vc-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Volcano's controller-manager is not built (%s): run 'make test-tools' (hack/tools.sh vc-controller-manager)", bin)
	}
	// Volcano's scheduler creates the default Queue in a real cluster; none runs here.
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}}
	if err := env.Client.Create(context.Background(), q); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the default Queue: %v", err)
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(env.Config, kc))
	var out bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig="+kc, "--leader-elect=false",
		"--controllers=job-controller,pg-controller", "--enable-healthz=false", "--enable-metrics=false",
		"--worker-threads=2")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("vc-controller-manager output:\n%s", framework.Tail(out.String(), 4000))
		}
	})
	// Positive signal that Volcano's job controller runs: it makes a probe Job's PodGroup. The tests'
	// deadlines count from their jobs' creation and must not race Volcano's start-up.
	volcanoStarts++
	probeNS := newNamespace(t, fmt.Sprintf("vc-probe-%d", volcanoStarts))
	probe := newVCJob(probeNS, "probe", -1)
	create(t, probe)
	waitFor(t, 60*time.Second, "Volcano's job controller makes the probe Job's PodGroup", func(ctx context.Context) (bool, error) {
		n, err := ownPodGroups(ctx, probeNS, probe)
		return n == 1, err
	})
}

// volcanoStarts numbers startVolcanoJobController's probe namespaces.
var volcanoStarts int

func vcJob(ctx context.Context, ns, name string) (*batchv1alpha1.Job, error) {
	var j batchv1alpha1.Job
	return &j, get(ctx, &j, ns, name)
}

// waitInqueue waits until hyperbatch's PodGroup status controller (started by the test's manager)
// has moved the job's PodGroup out of Pending: Volcano's job controller creates a job's pods only then.
func waitInqueue(t *testing.T, ns string, j *batchv1alpha1.Job) {
	t.Helper()
	waitFor(t, 30*time.Second, "the job's PodGroup enqueued by the PodGroup status controller", func(ctx context.Context) (bool, error) {
		var l schedulingv1beta1.PodGroupList
		if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for i := range l.Items {
			if metav1.IsControlledBy(&l.Items[i], j) {
				ph := l.Items[i].Status.Phase
				return ph != "" && ph != schedulingv1beta1.PodGroupPending, nil
			}
		}
		return false, nil
	})
}

func jobPods(ctx context.Context, ns, job string) (int, error) {
	var l corev1.PodList
	err := env.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: job})
	return len(l.Items), err
}

func ownPodGroups(ctx context.Context, ns string, j *batchv1alpha1.Job) (int, error) {
	var l schedulingv1beta1.PodGroupList
	if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for i := range l.Items {
		if metav1.IsControlledBy(&l.Items[i], j) {
			n++
		}
	}
	return n, nil
}

// With Volcano's real job controller: the deadline's AbortJob command ends the job — pods gone,
// state Aborted, PodGroup removed.
func TestVolcanoJobDeadlineWithVolcano(t *testing.T) {
	startVolcanoJobController(t)
	ns := newNamespace(t, "vcjob-volcano")
	startManager(t, ns, managerOptions{podGroupStatus: true})
	job := newVCJob(ns, "train", 10)
	job.Spec.Tasks[0].Replicas, job.Spec.MinAvailable = 2, 2
	job.Spec.SchedulerName = podgroupstatus.DefaultSchedulerName
	create(t, job)
	waitInqueue(t, ns, job)
	waitFor(t, 30*time.Second, "Volcano creates the 2 pods", func(ctx context.Context) (bool, error) {
		n, err := jobPods(ctx, ns, "train")
		return n == 2, err
	})
	waitFor(t, 60*time.Second, "Aborted, pods gone, PodGroup removed", func(ctx context.Context) (bool, error) {
		cur, err := vcJob(ctx, ns, "train")
		if err != nil {
			return false, err
		}
		pods, err := jobPods(ctx, ns, "train")
		if err != nil {
			return false, err
		}
		pgs, err := ownPodGroups(ctx, ns, cur)
		if err != nil {
			return false, err
		}
		if cur.Status.State.Phase != batchv1alpha1.Aborted || pods != 0 || pgs != 0 {
			return false, fmt.Errorf("phase %s, %d pods, %d PodGroups", cur.Status.State.Phase, pods, pgs)
		}
		return true, nil
	})
	cur, err := vcJob(context.Background(), ns, "train")
	require.NoError(t, err)
	require.Equal(t, lifecycle.ReasonDeadlineExceeded, cur.Annotations[lifecycle.TerminationReasonAnnotation])
	decided, err := time.Parse(time.RFC3339, cur.Annotations[lifecycle.DeadlineExceededAtAnnotation])
	require.NoError(t, err)
	requireWithin(t, "abort decision", cur.CreationTimestamp.Time, decided, 10*time.Second)
	// Volcano executed and deleted the Command.
	var cmds busv1alpha1.CommandList
	require.NoError(t, env.Client.List(context.Background(), &cmds, client.InNamespace(ns)))
	require.Empty(t, cmds.Items)
}

// With Volcano's real job controller: time suspended (vcctl job suspend = AbortJob, Aborted) does
// not count, and the resume (vcctl job resume = ResumeJob) restarts the clock. A control job with
// the same deadline, not suspended, is the positive signal that the deadline has passed.
func TestVolcanoJobSuspendResumeResetsClock(t *testing.T) {
	startVolcanoJobController(t)
	ns := newNamespace(t, "vcjob-resume")
	startManager(t, ns, managerOptions{})
	paused, control := newVCJob(ns, "paused", 10), newVCJob(ns, "control", 10)
	create(t, paused)
	create(t, control)
	userCommand := func(j *batchv1alpha1.Job, action busv1alpha1.Action) {
		t.Helper()
		ref := metav1.NewControllerRef(j, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))
		create(t, &busv1alpha1.Command{ObjectMeta: metav1.ObjectMeta{GenerateName: j.Name + "-user-", Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{*ref}}, Action: string(action), TargetObject: ref})
	}
	userCommand(paused, busv1alpha1.AbortJobAction)
	waitFor(t, 30*time.Second, "paused job Aborted by the user", func(ctx context.Context) (bool, error) {
		cur, err := vcJob(ctx, ns, "paused")
		return err == nil && cur.Status.State.Phase == batchv1alpha1.Aborted, err
	})
	waitFor(t, 30*time.Second, "control job aborted for its deadline", func(ctx context.Context) (bool, error) {
		cur, err := vcJob(ctx, ns, "control")
		return err == nil && cur.Annotations[lifecycle.DeadlineExceededAtAnnotation] != "", err
	})
	cur, err := vcJob(context.Background(), ns, "paused")
	require.NoError(t, err)
	require.Empty(t, cur.Annotations[lifecycle.DeadlineExceededAtAnnotation], "a suspended job's deadline ran")

	userCommand(cur, busv1alpha1.ResumeJobAction)
	var resumed time.Time
	waitFor(t, 30*time.Second, "paused job resumed", func(ctx context.Context) (bool, error) {
		cur, err := vcJob(ctx, ns, "paused")
		if err != nil {
			return false, err
		}
		start := workload.VCJobStart(cur)
		if start == nil || !start.After(cur.CreationTimestamp.Time) {
			return false, fmt.Errorf("phase %s", cur.Status.State.Phase)
		}
		resumed = *start
		return true, nil
	})
	waitFor(t, 30*time.Second, "resumed job aborted for its deadline", func(ctx context.Context) (bool, error) {
		cur, err := vcJob(ctx, ns, "paused")
		return err == nil && cur.Annotations[lifecycle.DeadlineExceededAtAnnotation] != "", err
	})
	cur, err = vcJob(context.Background(), ns, "paused")
	require.NoError(t, err)
	decided, err := time.Parse(time.RFC3339, cur.Annotations[lifecycle.DeadlineExceededAtAnnotation])
	require.NoError(t, err)
	requireWithin(t, "abort after resume", resumed, decided, 10*time.Second)
}
