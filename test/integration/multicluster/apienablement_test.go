package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// volcanoJobCRD is the name of Volcano's Job CRD.
const volcanoJobCRD = "jobs.batch.volcano.sh"

// clusterServesVolcanoJob waits until Karmada's Cluster of member reports (or no longer reports,
// with a complete list) batch.volcano.sh/v1alpha1 Job in its status.apiEnablements.
func clusterServesVolcanoJob(ctx context.Context, t *testing.T, member string, want bool) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("Cluster %s serves Volcano Jobs: %v", member, want), func(ctx context.Context) (bool, string) {
		var c clusterv1alpha1.Cluster
		if err := plane.Client.Get(ctx, client.ObjectKey{Name: member}, &c); err != nil {
			return false, err.Error()
		}
		got := servesKind(c.Status.APIEnablements, "batch.volcano.sh/v1alpha1", "Job")
		complete := meta(c.Status.Conditions, clusterv1alpha1.ClusterConditionCompleteAPIEnablements)
		return got == want && complete, fmt.Sprintf("serves %v, complete %v", got, complete)
	})
}

// removeVolcanoJobCRD deletes Volcano's Job CRD from a member (which then has no Volcano Job) and
// waits until Karmada's Cluster no longer lists the kind; the test's cleanup installs it again from
// _output/crds/volcano and waits until the Cluster lists it again.
func removeVolcanoJobCRD(ctx context.Context, t *testing.T, member string) {
	t.Helper()
	crd := volcanoJobCRDFromFile(t)
	c := members[member].Client
	require.NoError(t, c.Delete(ctx, crd.DeepCopy()))
	waitFor(ctx, t, volcanoJobCRD+" gone from "+member, func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: volcanoJobCRD}, crd.DeepCopy())
		return apierrors.IsNotFound(err), errString(err)
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		require.NoError(t, c.Create(ctx, crd.DeepCopy()))
		waitFor(ctx, t, volcanoJobCRD+" Established in "+member, func(ctx context.Context) (bool, string) {
			got := crd.DeepCopy()
			if err := c.Get(ctx, client.ObjectKey{Name: volcanoJobCRD}, got); err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, ""
				}
			}
			return false, describe(conds)
		})
		clusterServesVolcanoJob(ctx, t, member, true)
	})
	clusterServesVolcanoJob(ctx, t, member, false)
}

// volcanoJobCRDFromFile reads Volcano's Job CRD from _output/crds/volcano (`make crds`).
func volcanoJobCRDFromFile(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(framework.RepoRoot(), "_output", "crds", "volcano")
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f.Name()))
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				break
			}
			if u.GetKind() == "CustomResourceDefinition" && u.GetName() == volcanoJobCRD {
				return u
			}
		}
	}
	t.Fatalf("no CRD %s in %s", volcanoJobCRD, dir)
	return nil
}

// TestAutoSplitLeavesOutAMemberWithoutVolcanoJobs (issue 38): member2 loses Volcano's Job CRD,
// and Karmada's Cluster stops listing the kind.
//   - An auto split that member2 fits best (its one leaf holds the child exactly) is decided over
//     member1, and the decision says why member2 was left out; the child runs in member1. Before,
//     member2 was chosen, Karmada refused the binding ("did not have the API resource") and the
//     HyperJob waited for good.
//   - A split decided for member2 before it lost the kind (the annotation written at creation, as
//     the controller wrote it before) is refused by Karmada's scheduler; the HyperJob gets the
//     AutoSplitRefused Event naming member2 and Karmada's message, is decided again once without
//     member2, and its child runs in member1.
//
// It deletes a CRD in member2, so it runs alone (before the parallel tests) and puts the CRD back.
func TestAutoSplitLeavesOutAMemberWithoutVolcanoJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns = "auto-noapi"
	removeVolcanoJobCRD(ctx, t, "member2")
	autoSetup(ctx, t, ns)

	hj := autoHyperJob(ns, "noapi", 1, 2)
	require.NoError(t, plane.Client.Create(ctx, hj))
	got := waitAutoCondition(ctx, t, client.ObjectKeyFromObject(hj), metav1.ConditionTrue)
	assert.Equal(t, map[string]string{"noapi-w-0": "member1/m1-leaf-0"}, autoPlaces(t, got))
	c := apimeta.FindStatusCondition(got.Status.Conditions, hyperjob.ConditionAutoSplit)
	assert.Equal(t, "decided: member1: 1 (noapi-w-0 in m1-leaf-0); left out: member2 (serves no batch.volcano.sh/v1alpha1 Job: not in its Cluster's status.apiEnablements, so Karmada places no child there)", c.Message)
	evs, err := hyperJobEvents(ctx, ns, hj.Name, hyperjob.ReasonAutoSplitDecided)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0].Message, "left out: member2 (serves no batch.volcano.sh/v1alpha1 Job")
	waitChildrenCompleted(ctx, t, ns, autoPlaces(t, got))

	before := autoHyperJob(ns, "before", 1, 2)
	before.Annotations = map[string]string{hbv1.AutoSplitAnnotation: `{"resource":"nvidia.com/gpu","children":{"before-w-0":{"cluster":"member2","domain":"m2-leaf-0","pods":2,"podDemand":4}}}`}
	require.NoError(t, plane.Client.Create(ctx, before))
	waitFor(ctx, t, "AutoSplitRefused Event on before", func(ctx context.Context) (bool, string) {
		evs, err := hyperJobEvents(ctx, ns, before.Name, hyperjob.ReasonAutoSplitRefused)
		if err != nil {
			return false, err.Error()
		}
		return len(evs) > 0, describe(evs)
	})
	evs, err = hyperJobEvents(ctx, ns, before.Name, hyperjob.ReasonAutoSplitRefused)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0].Message, "member2: Karmada refused child before-w-0 there: 0/2 clusters are available:")
	assert.Contains(t, evs[0].Message, "did not have the API resource")
	assert.Contains(t, evs[0].Message, "deciding the split again without member2 (once)")
	t.Logf("refused: %s", evs[0].Message)

	var decided trainingv1alpha1.HyperJob
	waitFor(ctx, t, "before decided again for member1", func(ctx context.Context) (bool, string) {
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(before), &decided); err != nil {
			return false, err.Error()
		}
		return decided.Annotations[hbv1.AutoSplitAnnotation] != "" && strings.Contains(decided.Annotations[hbv1.AutoSplitAnnotation], `"before-w-0":{"cluster":"member1"`),
			decided.Annotations[hbv1.AutoSplitAnnotation]
	})
	assert.Contains(t, decided.Annotations[hbv1.AutoSplitAnnotation], `"redecided":true`)
	places := autoPlaces(t, &decided)
	waitChildrenCompleted(ctx, t, ns, places)
	clusters, err := bindingClusters(ctx, ns, "before-w-0")
	require.NoError(t, err)
	assert.Equal(t, []string{"member1"}, clusters)
	got = waitAutoCondition(ctx, t, client.ObjectKeyFromObject(before), metav1.ConditionTrue)
	c = apimeta.FindStatusCondition(got.Status.Conditions, hyperjob.ConditionAutoSplit)
	assert.Contains(t, c.Message, "left out: member2 (Karmada refused child before-w-0 there: ")
	t.Logf("decided again: %s", c.Message)
}
