package podgroupstatus

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// volcanoControllerManager is Volcano's controller-manager binary: HB_VC_CONTROLLER_MANAGER, or
// bin/vc-controller-manager; "" when neither exists.
func volcanoControllerManager() string {
	for _, p := range []string{os.Getenv("HB_VC_CONTROLLER_MANAGER"), filepath.Join(framework.AssetsDir(), "vc-controller-manager")} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// ensureRootQueue creates the root Queue Volcano's queue controller expects as every Queue's parent
// (Volcano's scheduler, not run here, creates it), unless an earlier test did; it is kept.
func ensureRootQueue(t *testing.T) {
	t.Helper()
	if err := env.Client.Create(ctxFor(t, 30*time.Second), builders.MakeQueue("root").Obj()); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// startVolcano runs Volcano's job and queue controllers against the test control plane until the
// test ends; their log goes to a file printed on failure.
func startVolcano(t *testing.T, bin string) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(env.Config, kc))
	logFile, err := os.Create(filepath.Join(dir, "vc-controller-manager.log"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig="+kc, "--controllers=job-controller,queue-controller",
		"--leader-elect=false", "--worker-threads=2", "--logtostderr=true", "-v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start(), "starting %s", bin)
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				if len(b) > 15000 {
					b = b[len(b)-15000:]
				}
				t.Logf("vc-controller-manager log tail:\n%s", b)
			}
		}
	})
}

// A Volcano Job with schedulerName hyperbatch-scheduler starts under Volcano's real job controller:
// this controller enqueues its PodGroup, Volcano creates the pods, hyperbatch-scheduler places them in
// one HyperNode, they run and succeed (the test plays the kubelet), the PodGroup is Running then
// Completed and the Job Completed.
func TestVolcanoJobWithRealJobController(t *testing.T) {
	bin := volcanoControllerManager()
	if bin == "" {
		t.Fatal("Volcano's controller-manager binary is not built: run 'make test-tools', set HB_VC_CONTROLLER_MANAGER, or put vc-controller-manager in bin/")
	}
	dumpLogOnFailure(t)
	ns := namespace(t, "vcjob")
	rack(t, "vcjob", "vcjob-rack-0", 2)
	rack(t, "vcjob", "vcjob-rack-1", 2)
	// Volcano's scheduler (not run here) creates the root Queue that Volcano's queue controller
	// expects as every Queue's parent; its queue controller then opens vcjob-q.
	ensureRootQueue(t)
	vcQueue := queue(t, "vcjob-q", nil, "", "")
	startVolcano(t, bin)

	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), gpu: resource.MustParse("4")}
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"},
		Spec: batchv1alpha1.JobSpec{SchedulerName: hb, Queue: vcQueue, MinAvailable: 4,
			NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)},
			Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 4, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"hb-test": "vcjob"},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1",
					Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{gpu: req[gpu]}}}}}}}}}}
	phases := recordPhases(t, ns, "") // from before the PodGroup exists
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), job))

	// Volcano's job controller creates the PodGroup (named after the Job and its UID).
	var pgName string
	waitFor(t, 60*time.Second, "Volcano's job controller to create the PodGroup", func(ctx context.Context) (bool, error) {
		var l schedulingv1beta1.PodGroupList
		if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, pg := range l.Items {
			if ref := metav1.GetControllerOf(&pg); ref != nil && ref.Kind == "Job" && ref.Name == "train" {
				pgName = pg.Name
				return true, nil
			}
		}
		return false, nil
	})
	phases.of(pgName)
	waitFor(t, 60*time.Second, "the PodGroup stored Inqueue", func(context.Context) (bool, error) {
		for _, p := range phases.get() {
			if p == schedulingv1beta1.PodGroupInqueue {
				return true, nil
			}
		}
		return false, nil
	})
	kubectlShows(t, ns, pgName, "")
	waitFor(t, 30*time.Second, "Volcano's queue controller to open the Queue", func(ctx context.Context) (bool, error) {
		var q schedulingv1beta1.Queue
		err := env.Client.Get(ctx, client.ObjectKey{Name: vcQueue}, &q)
		return err == nil && q.Status.State == schedulingv1beta1.QueueStateOpen, err
	})

	// Volcano creates the pods only now; hyperbatch-scheduler places all 4 in one rack.
	var nodes []string
	waitFor(t, 90*time.Second, "Volcano's pods bound", func(ctx context.Context) (bool, error) {
		var l corev1.PodList
		if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		nodes = nodes[:0]
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return len(nodes) == 4, nil
	})
	racks := map[string]bool{}
	for _, n := range nodes {
		racks[n[:len("vcjob-rack-0")]] = true
	}
	assert.Len(t, racks, 1, "Volcano Job's pods placed inside one HyperNode: %v", nodes)
	waitPG(t, ns, pgName, "Running", phaseIs(schedulingv1beta1.PodGroupRunning))
	kubectlShows(t, ns, pgName, "Running")

	var pods corev1.PodList
	require.NoError(t, env.Client.List(ctxFor(t, 10*time.Second), &pods, client.InNamespace(ns)))
	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded} {
		for _, p := range pods.Items {
			cur, err := cs.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
			require.NoError(t, err)
			cur.Status.Phase = phase
			if phase == corev1.PodSucceeded {
				cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}}}
			}
			_, err = cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	waitFor(t, 60*time.Second, "the Volcano Job Completed", func(ctx context.Context) (bool, error) {
		var j batchv1alpha1.Job
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return false, err
		}
		return j.Status.State.Phase == batchv1alpha1.Completed, nil
	})
	waitFor(t, 30*time.Second, "the PodGroup to be seen Completed", func(context.Context) (bool, error) {
		p := phases.get()
		return len(p) > 0 && p[len(p)-1] == schedulingv1beta1.PodGroupCompleted, nil
	})
	// Each phase in order (Volcano's job controller creates the PodGroup Pending or without a phase).
	got := phases.get()
	var order []schedulingv1beta1.PodGroupPhase
	for _, p := range got {
		if p == schedulingv1beta1.PodGroupInqueue || p == schedulingv1beta1.PodGroupRunning || p == schedulingv1beta1.PodGroupCompleted {
			order = append(order, p)
		}
	}
	assert.Equal(t, []schedulingv1beta1.PodGroupPhase{schedulingv1beta1.PodGroupInqueue, schedulingv1beta1.PodGroupRunning, schedulingv1beta1.PodGroupCompleted}, order, "phases seen: %v", got)
}

// kubectlShows checks that `kubectl get podgroup` prints the PodGroup with the phase (any phase when
// "").
func kubectlShows(t *testing.T, ns, name, phase string) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(env.Config, kc))
	out, err := exec.Command(filepath.Join(framework.AssetsDir(), "kubectl"), "--kubeconfig="+kc, "get", "podgroup", "-n", ns, name).CombinedOutput()
	require.NoError(t, err, "kubectl: %s", out)
	assert.Contains(t, string(out), "STATUS")
	if phase != "" {
		assert.True(t, strings.Contains(string(out), phase), fmt.Sprintf("kubectl get podgroup shows %q:\n%s", phase, out))
	}
}
