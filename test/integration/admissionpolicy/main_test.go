// Package admissionpolicy tests hyperbatch's in-process admission mode against a real
// kube-apiserver: the generated MutatingAdmissionPolicies and ValidatingAdmissionPolicies
// (internal/admissionpolicy) with the params the admissionparams controller writes, side by side
// with the webhooks on one apiserver. Namespaces labelled admission=webhook go to the Pod webhooks,
// namespaces labelled admission=policy to the policies; otherwise the two are set up alike.
package admissionpolicy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/admissionparams"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// modeLabel splits the namespaces between the two modes.
const modeLabel = "hyperbatch.test/admission"

var (
	env *framework.WebhookEnv
	// paramsWriter is the test's own user, which the webhook env's manager (and so the
	// admissionparams controller) runs as: the params guard's one writer.
	paramsWriter string
)

func fixtures() []client.Object {
	return []client.Object{
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-normal"}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-high"}, Value: 5000},
		builders.TeamA().Obj(),
		builders.MakePolicy("missing-class").Selector("team", "nopc").PriorityClass("does-not-exist").Obj(),
		softPolicy(),
		&hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-selector"}, Spec: hbv1.WorkloadPolicySpec{
			Weight: 100, NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "team", Operator: "in", Values: []string{"b"}}}},
			AllowedQueues: []string{"team-a", "b-only"},
		}},
		builders.MakePolicy("default-scheduler").Selector("team", "ds").Scheduler("default-scheduler").
			PriorityClass("batch-high").Obj(),
		&hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tier-only"}, Spec: hbv1.WorkloadPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "tier"}},
			Defaults:          hbv1.PolicyDefaults{NetworkTopology: &hbv1.NetworkTopology{HighestTierAllowed: ptr.To[int32](1)}},
		}},
	}
}

// softPolicy fills a NamespaceQueue, the volcano scheduler and a soft
// topology without a tier.
func softPolicy() *hbv1.WorkloadPolicy {
	p := builders.MakePolicy("soft").Selector("team", "soft").Queue("namespace/soft").Scheduler("volcano").Obj()
	p.Spec.Defaults.NetworkTopology = &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologySoft}
	return p
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	framework.SetupLogs(framework.QuietErrors)
	w, err := framework.StartWithWebhooks(framework.WebhookEnvOptions{
		// Trainer's CRDs too: TestEquivalentTrainJobs.
		CRDDirs:  append(framework.DefaultCRDDirs(), filepath.Join(framework.RepoRoot(), "_output", "crds", "trainer")),
		Fixtures: fixtures(),
		Config: func(o *hbwebhook.ConfigOptions) {
			o.PodNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: "webhook"}}
		},
		Register: func(mgr manager.Manager) error {
			return admissionparams.NewReconciler(mgr, hbwebhook.DefaultNamespace).SetupWithManager(mgr)
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "control plane with webhooks did not start: %v\n", err)
		return 1
	}
	defer w.Stop()
	env = w
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err == nil {
		var r *authenticationv1.SelfSubjectReview
		if r, err = cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
			paramsWriter = r.Status.UserInfo.Username
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "finding the test's user name: %v\n", err)
		return 1
	}
	for _, obj := range policyObjects() {
		if err := env.Client.Create(ctx, obj); err != nil {
			fmt.Fprintf(os.Stderr, "creating %T %s: %v\n", obj, obj.GetName(), err)
			return 1
		}
	}
	return m.Run()
}

// policyObjects are the generated policies and bindings, applying in namespaces labelled
// admission=policy.
func policyObjects() []client.Object {
	return admissionpolicy.Objects(admissionpolicy.Options{
		Excluded:          []string{hbwebhook.DefaultNamespace},
		ParamsWriters:     []string{paramsWriter},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: "policy"}},
	})
}
