package multicluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// cpNamespace is the namespace of TestControlPlaneManagerProcess; cpNamespaceLabel selects it for
// its WorkloadPolicy.
const (
	cpNamespace      = "cp-process"
	cpNamespaceLabel = "hyperbatch-e2e/cp-process"
)

// cpPolicy governs cpNamespace: every replicatedJob's templateSpec.schedulerName defaults to
// Volcano's scheduler, and its children may go to member1 only.
const cpPolicy = `apiVersion: hyperbatch.dev/v1alpha1
kind: WorkloadPolicy
metadata: {name: cp-process}
spec:
  namespaceSelector:
    matchLabels: {"hyperbatch-e2e/cp-process": "yes"}
  defaults:
    schedulerName: volcano
  allowedClusters: [member1]
`

// cpHyperJob is what a user applies: two children of one 1-GPU pod for member1, with no
// schedulerName (the policy fills it).
const cpHyperJob = `apiVersion: training.volcano.sh/v1alpha1
kind: HyperJob
metadata: {name: hj, namespace: cp-process}
spec:
  replicatedJobs:
  - name: w
    replicas: 2
    clusterNames: [member1]
    templateSpec:
      minAvailable: 1
      queue: default
      tasks:
      - name: t
        replicas: 1
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: c
              image: busybox:1
              resources:
                limits: {nvidia.com/gpu: 1}
                requests: {nvidia.com/gpu: 1}
`

// cpKubectl runs bin/kubectl against the Karmada apiserver with the plane's admin kubeconfig and
// the manifest on stdin; it returns stdout and stderr (admission warnings) and the error.
func cpKubectl(ctx context.Context, manifest string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(framework.AssetsDir(), "kubectl"), append([]string{"--kubeconfig", plane.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(manifest)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// TestControlPlaneManagerProcess runs hyperbatch's real manager binary in --mode=control-plane
// against the suite's Karmada plane, started exactly as `make run-multicluster` starts it
// (localproc.Hyperbatch: URL-mode webhooks registered by the manager on the Karmada apiserver with
// its own CA and caBundle; the HyperJob, lifecycle and WorkloadPolicy controllers), and drives it
// with kubectl as a user would:
//   - its webhooks admit on the plane: a HyperJob whose replicatedJob names a cluster the
//     namespace's WorkloadPolicy does not allow is refused, the message naming the field; so is a
//     PropagationPolicy for that cluster; an allowed HyperJob gets the policy's schedulerName
//     default, with kubectl's warning and the defaulted-by annotation;
//   - the process's HyperJob controller splits it, Karmada propagates the children to member1, where
//     Volcano runs them;
//   - deleting the HyperJob removes every child from the plane and member1 within 60 s.
//
// It runs alone (not parallel): the process's controllers watch every namespace of the plane, so
// no test-process HyperJob controller may run beside it; when it ends the process stops and its
// webhook configurations are removed from the plane.
func TestControlPlaneManagerProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: cpNamespace, Labels: map[string]string{cpNamespaceLabel: "yes"}}}))

	started := time.Now()
	mgr, err := plane.StartManager(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := mgr.Stop(context.Background()); err != nil {
			t.Errorf("stopping the control-plane manager: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log tail:\n%s", mgr.Process.LogTail(40))
		}
	})
	t.Logf("manager (control-plane mode) ready in %s", time.Since(started).Round(100*time.Millisecond))

	// hyperbatch's own namespace on the plane is not Karmada's to copy into the members (issue 38:
	// the copy failed in every member, whose own hyperbatch-system refused it). The manager labels
	// it; a namespace created after it does get Karmada's Work in member1, hyperbatch-system none.
	var own corev1.Namespace
	require.NoError(t, plane.Client.Get(ctx, client.ObjectKey{Name: localproc.HyperbatchNamespace}, &own))
	assert.Equal(t, "true", own.Labels[policyv1alpha1.NamespaceSkipAutoPropagationLabel])
	const probeNS = "cp-process-probe"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNS}}))
	waitFor(ctx, t, "Karmada's Work for namespace "+probeNS+" in member1", func(ctx context.Context) (bool, string) {
		names := namespaceWorks(ctx, t, "member1")
		return slices.Contains(names, probeNS), strings.Join(names, ", ")
	})
	assert.NotContains(t, namespaceWorks(ctx, t, "member1"), localproc.HyperbatchNamespace, "Karmada copies hyperbatch-system into no member")

	// The webhook configurations are the manager's, on the plane, with its caBundle.
	for _, name := range []string{"hyperbatch-mutating", "hyperbatch-validating"} {
		out, _, err := cpKubectl(ctx, "", "get", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "--field-selector", "metadata.name="+name,
			"-o", "jsonpath={.items[*].webhooks[*].clientConfig.caBundle}")
		require.NoError(t, err)
		assert.NotEmpty(t, out, "%s registered on the Karmada apiserver with a caBundle", name)
	}

	// The policy, applied with kubectl; the process's WorkloadPolicy controller reporting its
	// generation is the signal that the process (whose webhooks read policies from the same cache)
	// has it.
	_, _, err = cpKubectl(ctx, cpPolicy, "apply", "-f", "-")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = plane.Client.Delete(context.Background(), &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cp-process"}})
	})
	waitFor(ctx, t, "WorkloadPolicy cp-process observed by the manager process", func(ctx context.Context) (bool, string) {
		var wp hbv1.WorkloadPolicy
		if err := plane.Client.Get(ctx, client.ObjectKey{Name: "cp-process"}, &wp); err != nil {
			return false, err.Error()
		}
		return wp.Status.ObservedGeneration == wp.Generation && wp.Status.MatchingNamespaces == 1, describe(wp.Status)
	})

	// Refused on the plane, naming the field: a replicatedJob for member2, and a
	// PropagationPolicy for member2.
	bad := strings.Replace(cpHyperJob, "clusterNames: [member1]", "clusterNames: [member2]", 1)
	_, stderr, err := cpKubectl(ctx, bad, "apply", "-f", "-")
	require.Error(t, err, "a HyperJob for a cluster the policy does not allow is refused")
	assert.Contains(t, stderr, `spec.replicatedJobs[0].clusterNames: Forbidden: cluster "member2" is not allowed in namespace "cp-process"`)
	t.Logf("refused HyperJob: %s", strings.TrimSpace(stderr))
	const badPP = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: to-member2, namespace: cp-process}
spec:
  resourceSelectors: [{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: anything}]
  placement:
    clusterAffinity: {clusterNames: [member2]}
`
	_, stderr, err = cpKubectl(ctx, badPP, "apply", "-f", "-")
	require.Error(t, err, "a PropagationPolicy for a cluster the policy does not allow is refused")
	assert.Contains(t, stderr, `spec.placement.clusterAffinity.clusterNames: Forbidden: cluster "member2" is not allowed in namespace "cp-process"`)
	var hjs trainingv1alpha1.HyperJobList
	require.NoError(t, plane.Client.List(ctx, &hjs, client.InNamespace(cpNamespace)))
	require.Empty(t, hjs.Items, "nothing of the refused HyperJob was stored")

	// Admitted and defaulted.
	created := time.Now()
	_, stderr, err = cpKubectl(ctx, cpHyperJob, "apply", "-f", "-")
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, "Warning: hyperbatch: defaulted", "kubectl prints the defaulting warning")
	var hj trainingv1alpha1.HyperJob
	require.NoError(t, plane.Client.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: "hj"}, &hj))
	assert.Equal(t, "volcano", hj.Spec.ReplicatedJobs[0].TemplateSpec.SchedulerName, "the policy's schedulerName filled in by the webhook on the plane")
	assert.Contains(t, hj.Annotations[hbv1.DefaultedByAnnotation], "cp-process", "defaulted-by names the policy")

	// The process's controller makes the children; Karmada runs them in member1.
	children := []string{"hj-w-0", "hj-w-1"}
	for _, c := range children {
		waitFor(ctx, t, fmt.Sprintf("child %s running in member1", c), func(ctx context.Context) (bool, string) {
			var j batchv1alpha1.Job
			if err := members["member1"].Client.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: c}, &j); err != nil {
				return false, err.Error()
			}
			switch j.Status.State.Phase {
			case batchv1alpha1.Running, batchv1alpha1.Completing, batchv1alpha1.Completed:
				return true, ""
			}
			return hadPhase(j.Status.Conditions, batchv1alpha1.Running), describe(j.Status.State)
		})
	}
	t.Logf("both children running (or done) in member1 %s after kubectl apply", time.Since(created).Round(100*time.Millisecond))
	assert.Empty(t, jobsOf(ctx, t, "member2"), "member2 got nothing")

	// Deletion empties the plane and the member within 60 s.
	deleted := time.Now()
	_, stderr, err = cpKubectl(ctx, "", "delete", "hyperjob", "hj", "-n", cpNamespace, "--wait=false")
	require.NoError(t, err, stderr)
	gctx, gcancel := context.WithTimeout(ctx, 60*time.Second)
	defer gcancel()
	waitFor(gctx, t, "the HyperJob and its children gone from the plane and member1", func(ctx context.Context) (bool, string) {
		left := append(jobsOf(ctx, t, "member1"), jobsOf(ctx, t, "")...)
		err := plane.Client.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: "hj"}, &trainingv1alpha1.HyperJob{})
		if !apierrors.IsNotFound(err) {
			left = append(left, "HyperJob hj")
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	t.Logf("HyperJob and children gone from the plane and member1 %s after kubectl delete", time.Since(deleted).Round(100*time.Millisecond))
	assert.False(t, mgr.Process.Exited(), "the manager process kept running")
}

// jobsOf names the Volcano Jobs of cpNamespace in a member ("" for the plane).
func jobsOf(ctx context.Context, t *testing.T, member string) []string {
	t.Helper()
	c := plane.Client
	if member != "" {
		c = members[member].Client
	}
	var jobs batchv1alpha1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(cpNamespace)); err != nil {
		return []string{"listing: " + err.Error()}
	}
	var out []string
	for _, j := range jobs.Items {
		where := member
		if where == "" {
			where = "plane"
		}
		out = append(out, where+"/"+j.Name)
	}
	return out
}

// namespaceWorks names the namespaces Karmada's Works carry into a member.
func namespaceWorks(ctx context.Context, t *testing.T, member string) []string {
	t.Helper()
	var works workv1alpha1.WorkList
	require.NoError(t, plane.Client.List(ctx, &works, client.InNamespace("karmada-es-"+member)))
	var out []string
	for _, w := range works.Items {
		for _, m := range w.Spec.Workload.Manifests {
			var obj metav1.PartialObjectMetadata
			if err := json.Unmarshal(m.Raw, &obj); err == nil && obj.Kind == "Namespace" {
				out = append(out, obj.Name)
			}
		}
	}
	return out
}
