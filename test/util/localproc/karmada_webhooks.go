package localproc

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the webhook configurations a Karmada plane registers for karmada-webhook (Karmada's own
// deployment names them the same: artifacts/deploy/webhook-configuration.yaml).
const (
	KarmadaMutatingWebhookConfiguration   = "mutating-config"
	KarmadaValidatingWebhookConfiguration = "validating-config"
)

// karmadaWebhook is one admission webhook karmada-webhook serves.
type karmadaWebhook struct {
	name      string
	path      string
	group     string
	resources []string
	ops       []admissionregistrationv1.OperationType
	scope     admissionregistrationv1.ScopeType
	// sideEffects defaults to None.
	sideEffects admissionregistrationv1.SideEffectClass
	timeout     int32 // seconds; default 3
	// deletionProtected limits the webhook to objects labelled resourcetemplate.karmada.io/deletion-protected.
	deletionProtected bool
}

var (
	namespaced  = admissionregistrationv1.NamespacedScope
	clusterWide = admissionregistrationv1.ClusterScope
)

// karmadaMutatingWebhooks and karmadaValidatingWebhooks are the webhooks of Karmada v1.16.0's deployment
// (artifacts/deploy/webhook-configuration.yaml; the handlers are registered in cmd/webhook/app). The
// PropagationPolicy mutation matters most here: it stamps the permanent-id label the validation and
// Karmada's controllers require.
var karmadaMutatingWebhooks = []karmadaWebhook{
	{name: "propagationpolicy.karmada.io", path: "/mutate-propagationpolicy", group: "policy.karmada.io", resources: []string{"propagationpolicies"}, ops: createUpdate, scope: namespaced},
	{name: "clusterpropagationpolicy.karmada.io", path: "/mutate-clusterpropagationpolicy", group: "policy.karmada.io", resources: []string{"clusterpropagationpolicies"}, ops: createUpdate, scope: clusterWide},
	{name: "overridepolicy.karmada.io", path: "/mutate-overridepolicy", group: "policy.karmada.io", resources: []string{"overridepolicies"}, ops: createUpdate, scope: namespaced},
	{name: "resourcebinding.karmada.io", path: "/mutate-resourcebinding", group: "work.karmada.io", resources: []string{"resourcebindings"}, ops: create, scope: namespaced},
	{name: "clusterresourcebinding.karmada.io", path: "/mutate-clusterresourcebinding", group: "work.karmada.io", resources: []string{"clusterresourcebindings"}, ops: create, scope: clusterWide},
	{name: "work.karmada.io", path: "/mutate-work", group: "work.karmada.io", resources: []string{"works"}, ops: createUpdate, scope: namespaced},
	{name: "autoscaling.karmada.io", path: "/mutate-federatedhpa", group: "autoscaling.karmada.io", resources: []string{"federatedhpas"}, ops: createUpdate, scope: namespaced},
	{name: "multiclusterservice.karmada.io", path: "/mutate-multiclusterservice", group: "networking.karmada.io", resources: []string{"multiclusterservices"}, ops: createUpdate, scope: namespaced},
}

var karmadaValidatingWebhooks = []karmadaWebhook{
	{name: "propagationpolicy.karmada.io", path: "/validate-propagationpolicy", group: "policy.karmada.io", resources: []string{"propagationpolicies"}, ops: createUpdate, scope: namespaced},
	{name: "clusterpropagationpolicy.karmada.io", path: "/validate-clusterpropagationpolicy", group: "policy.karmada.io", resources: []string{"clusterpropagationpolicies"}, ops: createUpdate, scope: clusterWide},
	{name: "overridepolicy.karmada.io", path: "/validate-overridepolicy", group: "policy.karmada.io", resources: []string{"overridepolicies"}, ops: createUpdate, scope: namespaced},
	{name: "clusteroverridepolicy.karmada.io", path: "/validate-clusteroverridepolicy", group: "policy.karmada.io", resources: []string{"clusteroverridepolicies"}, ops: createUpdate, scope: clusterWide},
	{name: "config.karmada.io", path: "/validate-resourceinterpreterwebhookconfiguration", group: "config.karmada.io", resources: []string{"resourceinterpreterwebhookconfigurations"}, ops: createUpdate, scope: clusterWide},
	{name: "resourceinterpretercustomization.karmada.io", path: "/validate-resourceinterpretercustomization", group: "config.karmada.io", resources: []string{"resourceinterpretercustomizations"}, ops: createUpdate, scope: clusterWide, timeout: 10},
	{name: "federatedresourcequota.karmada.io", path: "/validate-federatedresourcequota", group: "policy.karmada.io", resources: []string{"federatedresourcequotas"}, ops: createUpdate, scope: namespaced},
	{name: "multiclusteringress.karmada.io", path: "/validate-multiclusteringress", group: "networking.karmada.io", resources: []string{"multiclusteringresses"}, ops: createUpdate, scope: namespaced},
	{name: "federatedhpa.karmada.io", path: "/validate-federatedhpa", group: "autoscaling.karmada.io", resources: []string{"federatedhpas"}, ops: createUpdate, scope: namespaced},
	{name: "cronfederatedhpa.karmada.io", path: "/validate-cronfederatedhpa", group: "autoscaling.karmada.io", resources: []string{"cronfederatedhpas"}, ops: createUpdate, scope: namespaced},
	{name: "multiclusterservice.karmada.io", path: "/validate-multiclusterservice", group: "networking.karmada.io", resources: []string{"multiclusterservices"}, ops: createUpdate, scope: namespaced},
	{name: "resourcedeletionprotection.karmada.io", path: "/validate-resourcedeletionprotection", group: "*", resources: []string{"*"},
		ops: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, scope: admissionregistrationv1.AllScopes, deletionProtected: true},
	{name: "resourcebinding.karmada.io", path: "/validate-resourcebinding", group: "work.karmada.io", resources: []string{"resourcebindings"}, ops: createUpdate, scope: namespaced,
		sideEffects: admissionregistrationv1.SideEffectClassNoneOnDryRun},
	{name: "clustertaintpolicy.karmada.io", path: "/validate-clustertaintpolicy", group: "policy.karmada.io", resources: []string{"clustertaintpolicies"}, ops: createUpdate, scope: clusterWide},
}

// deletionProtectedLabel marks resource templates karmada-webhook refuses to delete.
const deletionProtectedLabel = "resourcetemplate.karmada.io/deletion-protected"

func (w karmadaWebhook) parts(baseURL string, caBundle []byte) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations, *metav1.LabelSelector, *admissionregistrationv1.SideEffectClass, *int32) {
	url := baseURL + w.path
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: w.ops, Rule: admissionregistrationv1.Rule{
		APIGroups: []string{w.group}, APIVersions: []string{"*"}, Resources: w.resources, Scope: ptr.To(w.scope)}}}
	var sel *metav1.LabelSelector
	if w.deletionProtected {
		sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: deletionProtectedLabel, Operator: metav1.LabelSelectorOpExists}}}
	}
	se := admissionregistrationv1.SideEffectClassNone
	if w.sideEffects != "" {
		se = w.sideEffects
	}
	timeout := int32(3)
	if w.timeout != 0 {
		timeout = w.timeout
	}
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}, rules, sel, &se, &timeout
}

// karmadaWebhookConfigurations are karmada-webhook's configurations in URL mode: baseURL is where it serves
// (https://127.0.0.1:<port>), caBundle the CA that signed its serving certificate.
func karmadaWebhookConfigurations(baseURL string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	fail := admissionregistrationv1.Fail
	labels := map[string]string{"app": "karmada-webhook"}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: KarmadaMutatingWebhookConfiguration, Labels: labels}}
	for _, w := range karmadaMutatingWebhooks {
		cc, rules, sel, se, timeout := w.parts(baseURL, caBundle)
		mwc.Webhooks = append(mwc.Webhooks, admissionregistrationv1.MutatingWebhook{Name: w.name, ClientConfig: cc, Rules: rules,
			ObjectSelector: sel, FailurePolicy: &fail, SideEffects: se, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"}})
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: KarmadaValidatingWebhookConfiguration, Labels: labels}}
	for _, w := range karmadaValidatingWebhooks {
		cc, rules, sel, se, timeout := w.parts(baseURL, caBundle)
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: w.name, ClientConfig: cc, Rules: rules,
			ObjectSelector: sel, FailurePolicy: &fail, SideEffects: se, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"}})
	}
	return mwc, vwc
}

// registerKarmadaWebhooks creates karmada-webhook's configurations.
func registerKarmadaWebhooks(ctx context.Context, c client.Client, baseURL string, caBundle []byte) error {
	mwc, vwc := karmadaWebhookConfigurations(baseURL, caBundle)
	if err := c.Create(ctx, mwc); err != nil {
		return fmt.Errorf("registering karmada-webhook's MutatingWebhookConfiguration %s: %w", mwc.Name, err)
	}
	if err := c.Create(ctx, vwc); err != nil {
		return fmt.Errorf("registering karmada-webhook's ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	return nil
}
