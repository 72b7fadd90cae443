// Package webhook tests hyperbatch's admission webhooks against a real kube-apiserver: the
// configurations built by webhook.Configurations (URL mode) are installed by envtest, a
// controller-runtime manager serves webhook.Setup's handlers on envtest's host, port and certificate,
// and the tests create real objects through the apiserver (and through the project's kubectl).
package webhook

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

var (
	env        *framework.Env
	webhookURL string // https://127.0.0.1:<port>
)

// Policies every test may rely on. team-a governs namespaces labelled team=a.
func fixtures() []client.Object {
	return []client.Object{
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-normal"}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-high"}, Value: 5000},
		builders.TeamA().Obj(),
		builders.MakePolicy("missing-class").Selector("team", "nopc").PriorityClass("does-not-exist").Obj(),
		// Would govern kube-system and hyperbatch's namespace, were they ever sent to the webhook.
		&hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "system-trap"}, Spec: hbv1.WorkloadPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-system", hbwebhook.DefaultNamespace}}}},
			Defaults:      hbv1.PolicyDefaults{Queue: "trap", PriorityClassName: "batch-normal", TTLSecondsAfterFinished: ptr.To[int32](1)},
			AllowedQueues: []string{"trap"},
		}},
		&hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "short-ttl"}, Spec: hbv1.WorkloadPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "short"}},
			Defaults:          hbv1.PolicyDefaults{Queue: "q", TTLSecondsAfterFinished: ptr.To[int32](30)},
		}},
	}
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	framework.SetupLogs(framework.QuietErrors)
	w, err := framework.StartWithWebhooks(framework.WebhookEnvOptions{Fixtures: fixtures()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration control plane with webhooks did not start: %v\n", err)
		return 1
	}
	defer w.Stop()
	env, webhookURL = w.Env, w.URL
	return m.Run()
}

// warningClient is a client whose admission warnings the test can read.
func warningClient(t *testing.T) (client.Client, *framework.Warnings) {
	t.Helper()
	return framework.WarningClient(t, env.Config)
}

func createNamespace(t *testing.T, name string, labels, annotations map[string]string) {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func wantContains(t *testing.T, what, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%s %q does not contain %q", what, got, s)
		}
	}
}

// insecureTLS trusts envtest's webhook CA only; used to send hand-made AdmissionReviews.
func webhookHTTPClient(t *testing.T) *http.Client {
	t.Helper()
	pool, err := certPool(env.WebhookOptions().LocalServingCAData)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}
