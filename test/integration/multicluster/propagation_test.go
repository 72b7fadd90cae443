package multicluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// TestMembersJoined: both members are Ready Clusters whose resourceSummary counts exactly the kwok
// nodes' GPUs, and whose API enablements list Volcano's Job (Karmada's scheduler skips a cluster that
// does not serve the template's kind).
func TestMembersJoined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range sortedNames() {
		want := members[name].GPUs()
		var cluster clusterv1alpha1.Cluster
		// The summary is refreshed every 10 s (--cluster-status-update-frequency); it may lag the Ready
		// condition by one round.
		err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if err := plane.Client.Get(ctx, client.ObjectKey{Name: name}, &cluster); err != nil {
				return false, nil //nolint:nilerr // keep polling; the failure message shows the last status
			}
			rs := cluster.Status.ResourceSummary
			return rs != nil && !rs.Allocatable.Name(membercluster.GPUResource, "").IsZero(), nil
		})
		require.NoError(t, err, "Cluster %s never reported allocatable %s: %+v", name, membercluster.GPUResource, cluster.Status)
		got := cluster.Status.ResourceSummary.Allocatable[membercluster.GPUResource]
		assert.Equal(t, want, got.Value(), "Cluster %s: resourceSummary.allocatable[%s] is the sum of its kwok nodes", name, membercluster.GPUResource)
		assert.Equal(t, int32(len(memberNodes[name])), cluster.Status.NodeSummary.ReadyNum, "Cluster %s: ready nodes", name)
		assert.True(t, servesKind(cluster.Status.APIEnablements, "batch.volcano.sh/v1alpha1", "Job"),
			"Cluster %s: apiEnablements list batch.volcano.sh/v1alpha1 Job", name)
		assert.True(t, meta(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady), "Cluster %s Ready", name)
	}
}

// TestVolcanoJobPropagation: Volcano's own example Job (volcano.sh/volcano example/job.yaml), created
// on the Karmada apiserver with a PropagationPolicy for member2, is applied there by Karmada, run to
// Completed by Volcano's controllers and scheduler with kwok as kubelet, its status comes back to the
// template through Karmada's built-in Volcano Job interpreter, member1 never gets it, the template
// stays inert on the plane, and deleting the template removes the member's Job within 60 s.
func TestVolcanoJobPropagation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns, target, other = "propagation", "member2", "member1"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	job := volcanoExampleJob(t)
	job.Namespace = ns
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: job.Name}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{target}}},
		},
	}
	require.NoError(t, plane.Client.Create(ctx, pp))
	// karmada-webhook stamped the permanent id Karmada's validation and controllers rely on.
	require.NoError(t, plane.Client.Get(ctx, client.ObjectKeyFromObject(pp), pp))
	assert.NotEmpty(t, pp.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel], "karmada-webhook labels the PropagationPolicy with its permanent id")
	assert.Contains(t, pp.Finalizers, "karmada.io/propagation-policy-controller", "karmada-webhook adds Karmada's policy finalizer")
	assert.Equal(t, ns, pp.Spec.ResourceSelectors[0].Namespace, "karmada-webhook defaults the selector's namespace")
	created := time.Now()
	require.NoError(t, plane.Client.Create(ctx, job))

	// The binding is scheduled to the target only.
	binding := &workv1alpha2.ResourceBinding{}
	bindingKey := client.ObjectKey{Namespace: ns, Name: job.Name + "-job"}
	waitFor(ctx, t, "ResourceBinding "+bindingKey.String()+" scheduled", func(ctx context.Context) (bool, string) {
		if err := plane.Client.Get(ctx, bindingKey, binding); err != nil {
			return false, err.Error()
		}
		return len(binding.Spec.Clusters) > 0, describe(binding.Spec.Clusters)
	})
	require.Len(t, binding.Spec.Clusters, 1)
	assert.Equal(t, target, binding.Spec.Clusters[0].Name)

	// Karmada applies it in the target member; Volcano runs it there to Completed.
	mc := members[target].Client
	memberJob := &batchv1alpha1.Job{}
	waitFor(ctx, t, "the Job in "+target, func(ctx context.Context) (bool, string) {
		err := mc.Get(ctx, client.ObjectKeyFromObject(job), memberJob)
		return err == nil, errString(err)
	})
	t.Logf("Job applied in %s %s after creation", target, time.Since(created).Round(100*time.Millisecond))
	waitFor(ctx, t, "the Job Completed in "+target, func(ctx context.Context) (bool, string) {
		if err := mc.Get(ctx, client.ObjectKeyFromObject(job), memberJob); err != nil {
			return false, err.Error()
		}
		return memberJob.Status.State.Phase == batchv1alpha1.Completed, describe(memberJob.Status)
	})
	t.Logf("Job Completed in %s %s after creation", target, time.Since(created).Round(100*time.Millisecond))
	// Volcano created the pods and kwok ran them: the Job went through Running, and every pod Succeeded.
	// (Volcano v1.14 zeroes a finished Job's pod counters, so the pods are counted here.)
	assert.True(t, hadPhase(memberJob.Status.Conditions, batchv1alpha1.Running), "the member's Job was Running: %s", describe(memberJob.Status.Conditions))
	replicas := int(job.Spec.Tasks[0].Replicas)
	waitFor(ctx, t, "the member's pods Succeeded", func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		if err := mc.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		succeeded := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded {
				succeeded++
			}
		}
		return succeeded == replicas, fmt.Sprintf("%d of %d pods Succeeded", succeeded, replicas)
	})

	// Karmada's Volcano Job interpreter reflects the member's status and aggregates it on the template.
	tmpl := &batchv1alpha1.Job{}
	waitFor(ctx, t, "the template's aggregated status Completed", func(ctx context.Context) (bool, string) {
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(job), tmpl); err != nil {
			return false, err.Error()
		}
		return tmpl.Status.State.Phase == batchv1alpha1.Completed, describe(tmpl.Status)
	})
	// With one member the interpreter's aggregation is the member's reflected status (Volcano keeps
	// bumping status.version of a finished Job on every resync, so versions are not compared).
	assert.Equal(t, memberJob.Status.MinAvailable, tmpl.Status.MinAvailable)
	assert.True(t, hadPhase(tmpl.Status.Conditions, batchv1alpha1.Running), "the template shows the member's Running condition: %s", describe(tmpl.Status))
	require.NoError(t, plane.Client.Get(ctx, bindingKey, binding))
	require.Len(t, binding.Status.AggregatedStatus, 1)
	assert.Equal(t, target, binding.Status.AggregatedStatus[0].ClusterName)
	assert.True(t, binding.Status.AggregatedStatus[0].Applied, "Karmada reports the Job applied in %s", target)
	assert.Equal(t, workv1alpha2.ResourceHealthy, binding.Status.AggregatedStatus[0].Health, "the interpreter's health: Completed is healthy")

	// The template stayed inert: no Volcano controller runs on the plane, so it has no PodGroup there.
	var pgs schedulingv1beta1.PodGroupList
	require.NoError(t, plane.Client.List(ctx, &pgs, client.InNamespace(ns)))
	assert.Empty(t, pgs.Items, "no PodGroup on the Karmada apiserver")
	// The other member never got it (checked after the target ran it to completion).
	err := members[other].Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1alpha1.Job{})
	assert.True(t, apierrors.IsNotFound(err), "%s has no copy of the Job: %v", other, err)

	// Deleting the template removes the member's Job within 60 s.
	require.NoError(t, plane.Client.Delete(ctx, tmpl))
	deleted := time.Now()
	gone, cancelGone := context.WithTimeout(ctx, 60*time.Second)
	defer cancelGone()
	waitFor(gone, t, "the Job removed from "+target, func(ctx context.Context) (bool, string) {
		err := mc.Get(ctx, client.ObjectKeyFromObject(job), &batchv1alpha1.Job{})
		return apierrors.IsNotFound(err), errString(err)
	})
	t.Logf("Job removed from %s %s after the template's deletion", target, time.Since(deleted).Round(100*time.Millisecond))
	waitFor(ctx, t, "the ResourceBinding removed", func(ctx context.Context) (bool, string) {
		err := plane.Client.Get(ctx, bindingKey, &workv1alpha2.ResourceBinding{})
		return apierrors.IsNotFound(err), errString(err)
	})
	assert.Empty(t, plane.Crashed(), "no plane process crashed")
	for _, name := range sortedNames() {
		assert.Empty(t, members[name].Crashed(), "no process of %s crashed", name)
	}
}

// volcanoExampleJob reads Volcano's own example Job (volcano.sh/volcano example/job.yaml, the version
// hack/tools/volcano pins) from the Go module cache.
func volcanoExampleJob(t *testing.T) *batchv1alpha1.Job {
	t.Helper()
	dir, err := builders.VolcanoModuleDir()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "example", "job.yaml"))
	require.NoError(t, err)
	job := &batchv1alpha1.Job{}
	require.NoError(t, yaml.UnmarshalStrict(raw, job))
	require.Len(t, job.Spec.Tasks, 1, "Volcano's example has one task")
	return job
}

// waitFor polls cond every 500ms until it holds or ctx ends; the failure names what and the last state.
func waitFor(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last state: %s\n%s", what, err, last, plane.LogTails(20))
	}
}

// hadPhase reports whether a Volcano Job's condition history holds phase.
func hadPhase(conds []batchv1alpha1.JobCondition, phase batchv1alpha1.JobPhase) bool {
	for _, c := range conds {
		if c.Status == phase {
			return true
		}
	}
	return false
}

func servesKind(apis []clusterv1alpha1.APIEnablement, gv, kind string) bool {
	for _, a := range apis {
		if a.GroupVersion != gv {
			continue
		}
		for _, r := range a.Resources {
			if r.Kind == kind {
				return true
			}
		}
	}
	return false
}

func meta(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func describe(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}
