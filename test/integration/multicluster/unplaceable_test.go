package multicluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// volcanoJobReplicaResource is the only customization the plane gets (this file sorts last, so the
// package's other tests run before it exists): a replicaResource for
// Volcano's Job (Karmada's built-in interpreter has none), so Karmada's scheduler knows a child's
// pods and their requests and leaves out a member whose resourceSummary cannot hold them. One
// replica per pod, each with the requests of the largest task's pod. The built-in health, status
// reflection and aggregation scripts still apply.
const volcanoJobReplicaResource = `local kube = require("kube")
function GetReplicas(obj)
  local replicas = 0
  local requirement = nil
  local largest = -1
  for _, task in ipairs(obj.spec.tasks or {}) do
    replicas = replicas + (task.replicas or 0)
    local r = kube.accuratePodRequirements(task.template)
    local gpus = 0
    if r ~= nil and r.resourceRequest ~= nil and r.resourceRequest["nvidia.com/gpu"] ~= nil then
      gpus = tonumber(r.resourceRequest["nvidia.com/gpu"]) or 0
    end
    if gpus > largest then
      largest = gpus
      requirement = r
    end
  end
  return replicas, requirement
end`

// TestAllOrNothingWhileOneChildFitsNowhere: a HyperJob two of whose children fit member1 and one
// (a pod of 32 GPUs) fits no member (24 and 8 GPUs in all). With the replicaResource customization
// Karmada's scheduler places the two and finds no cluster with enough resource for the third; while it does, every
// PropagationPolicy stays suspended, any Work Karmada makes is suspended, and no member gets any child.
// Then a 32-GPU node joins member2: all three children are released at once and run in their members,
// and deleting the HyperJob removes them everywhere.
func TestAllOrNothingWhileOneChildFitsNowhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns, name = "allornothing", "hj2"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	ric := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
		"metadata": map[string]any{"name": "hyperbatch-test-volcano-job-replicas"},
		"spec": map[string]any{
			"target":         map[string]any{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"},
			"customizations": map[string]any{"replicaResource": map[string]any{"luaScript": volcanoJobReplicaResource}},
		},
	}}
	require.NoError(t, plane.Client.Create(ctx, ric))
	t.Cleanup(func() { _ = plane.Client.Delete(context.Background(), ric) })
	startHyperJobController(t, ns)

	gpuPod := func(gpus int64) corev1.PodTemplateSpec {
		p := builders.PodTemplate("busybox:1", gpus)
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{membercluster.GPUResource: q}
		p.Spec.SchedulerName = "volcano"
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		return p
	}
	ok := builders.MakeReplicatedJob("ok", 2).Clusters("member1").Template(gpuPod(4)).Obj()
	huge := builders.MakeReplicatedJob("huge", 1).Clusters("member1", "member2").Template(gpuPod(32)).Obj()
	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(ok, huge).Obj()
	hj.Spec.MaxDomains = ptr.To[int32](2)
	require.NoError(t, plane.Client.Create(ctx, hj))

	// The positive signal: Karmada's scheduler has decided every binding: the two that fit have
	// member1, the huge one failed for lack of resource (its requirements are the customization's).
	waitFor(ctx, t, "every binding decided by Karmada's scheduler", func(ctx context.Context) (bool, string) {
		var rbs workv1alpha2.ResourceBindingList
		if err := plane.Client.List(ctx, &rbs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		by := map[string]*workv1alpha2.ResourceBinding{}
		for i := range rbs.Items {
			by[rbs.Items[i].Name] = &rbs.Items[i]
		}
		a, b, h := by["hj2-ok-0-job"], by["hj2-ok-1-job"], by["hj2-huge-0-job"]
		if a == nil || b == nil || h == nil {
			return false, fmt.Sprintf("bindings %v", keysOf(by))
		}
		c := apimeta.FindStatusCondition(h.Status.Conditions, workv1alpha2.Scheduled)
		state := fmt.Sprintf("ok-0 %v, ok-1 %v, huge %v %s", a.Spec.Clusters, b.Spec.Clusters, h.Spec.Clusters, describe(c))
		// With a spread constraint Karmada reports SchedulerError "failed to select clusters: no
		// enough resource when selecting 1 clusters", not NoClusterFit.
		return len(a.Spec.Clusters) == 1 && len(b.Spec.Clusters) == 1 && c != nil && c.Status == metav1.ConditionFalse &&
			strings.Contains(c.Message, "no enough resource"), state
	})
	var h workv1alpha2.ResourceBinding
	require.NoError(t, plane.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hj2-huge-0-job"}, &h))
	require.NotNil(t, h.Spec.ReplicaRequirements, "the customization gave the binding its pods' requirements")
	gpus := h.Spec.ReplicaRequirements.ResourceRequest[membercluster.GPUResource]
	assert.Equal(t, int64(32), gpus.Value())
	assert.Empty(t, h.Spec.Clusters, "no member holds a pod of 32 GPUs")

	// While it is unplaceable: every policy suspended, no Work dispatched, no child in any member, no
	// release.
	var pps policyv1alpha1.PropagationPolicyList
	require.NoError(t, plane.Client.List(ctx, &pps, client.InNamespace(ns)))
	require.Len(t, pps.Items, 3)
	for _, pp := range pps.Items {
		assert.True(t, suspendedPP(&pp), "PropagationPolicy %s held", pp.Name)
	}
	for _, m := range sortedNames() {
		var works workv1alpha1.WorkList
		require.NoError(t, plane.Client.List(ctx, &works, client.InNamespace("karmada-es-"+m)))
		// Karmada may already make the Works of the scheduled children, but suspended: its execution
		// controller applies nothing of them to the member.
		for _, w := range works.Items {
			if strings.HasPrefix(w.Name, name+"-") {
				assert.True(t, ptr.Deref(w.Spec.SuspendDispatching, false), "Work %s for %s is suspended", w.Name, m)
			}
		}
		var jobs batchv1alpha1.JobList
		require.NoError(t, members[m].Client.List(ctx, &jobs, client.InNamespace(ns)))
		assert.Empty(t, jobs.Items, "%s has no child", m)
	}
	releases, err := hyperJobEvents(ctx, ns, name, hyperjob.ReasonDispatchingChildren)
	require.NoError(t, err)
	assert.Empty(t, releases, "no release")

	// Room appears: a node of 32 GPUs joins member2. Karmada's cluster status controller adds it to
	// member2's resourceSummary, its scheduler's retry of the failed binding then finds member2, and
	// only then (every child has a cluster) are all three children released and dispatched.
	room := localproc.MemberNodeObject(localproc.MemberNode{Name: "m2-room", GPUs: 32})
	require.NoError(t, members["member2"].Client.Create(ctx, room))
	t.Cleanup(func() { _ = members["member2"].Client.Delete(context.Background(), room) })
	want := map[string]string{"hj2-ok-0": "member1", "hj2-ok-1": "member1", "hj2-huge-0": "member2"}
	waitFor(ctx, t, "all three children released and running or finished in their members", func(ctx context.Context) (bool, string) {
		var states []string
		done := 0
		for child, m := range want {
			var j batchv1alpha1.Job
			if err := members[m].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &j); err != nil {
				states = append(states, fmt.Sprintf("%s in %s: %v", child, m, err))
				continue
			}
			phase := j.Status.State.Phase
			states = append(states, fmt.Sprintf("%s in %s: %s", child, m, phase))
			if phase == batchv1alpha1.Running || phase == batchv1alpha1.Completed {
				done++
			}
		}
		sort.Strings(states)
		return done == len(want), strings.Join(states, "; ")
	})
	releases, err = hyperJobEvents(ctx, ns, name, hyperjob.ReasonDispatchingChildren)
	require.NoError(t, err)
	assert.Len(t, releases, 1, "one release, once every child had a cluster")
	var pods corev1.PodList
	require.NoError(t, members["member2"].Client.List(ctx, &pods, client.InNamespace(ns)))
	require.NotEmpty(t, pods.Items, "the huge child's pod in member2")
	for _, p := range pods.Items {
		assert.Equal(t, room.Name, p.Spec.NodeName, "pod %s of 32 GPUs runs on the node that made the room", p.Name)
	}

	// Deleting the HyperJob leaves nothing on the plane or in the members.
	require.NoError(t, plane.Client.Delete(ctx, hj))
	waitFor(ctx, t, "the children gone from every member", func(ctx context.Context) (bool, string) {
		var left []string
		for _, m := range sortedNames() {
			var jobs batchv1alpha1.JobList
			if err := members[m].Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			for _, j := range jobs.Items {
				left = append(left, m+"/"+j.Name)
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	})
	waitFor(ctx, t, "the children gone from the plane", func(ctx context.Context) (bool, string) {
		var left []string
		for _, l := range []client.ObjectList{&batchv1alpha1.JobList{}, &policyv1alpha1.PropagationPolicyList{}, &workv1alpha2.ResourceBindingList{}} {
			if err := plane.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			items, _ := apimeta.ExtractList(l)
			for _, it := range items {
				left = append(left, it.(client.Object).GetName())
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	})
	require.NoError(t, client.IgnoreNotFound(plane.Client.Delete(ctx, ric)))
	err = plane.Client.Get(ctx, client.ObjectKeyFromObject(ric), ric.DeepCopy())
	assert.True(t, apierrors.IsNotFound(err), "customization removed: %v", err)
}
