package membercluster

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// volcanoHook is one admission webhook of Volcano's webhook-manager.
type volcanoHook struct {
	config, name, path, group, version, resource string
	ops                                          []admissionregistrationv1.OperationType
	mutating                                     bool
}

// volcanoHooks are the webhooks of Volcano's Helm chart (installer/helm/chart/volcano/templates/
// webhooks.yaml, v1.14.0-alpha.0) for volcanoAdmissions. vc-webhook-manager does not create its
// configurations: it looks them up by name ("volcano-admission-service" + the path with / replaced by
// -), injects its caBundle and waits until they exist, so they are created before it starts.
var volcanoHooks = []volcanoHook{
	{"volcano-admission-service-jobs-mutate", "mutatejob.volcano.sh", "/jobs/mutate", "batch.volcano.sh", "v1alpha1", "jobs",
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, true},
	{"volcano-admission-service-podgroups-mutate", "mutatepodgroup.volcano.sh", "/podgroups/mutate", "scheduling.volcano.sh", "v1beta1", "podgroups",
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, true},
	{"volcano-admission-service-queues-mutate", "mutatequeue.volcano.sh", "/queues/mutate", "scheduling.volcano.sh", "v1beta1", "queues",
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, true},
	{"volcano-admission-service-jobs-validate", "validatejob.volcano.sh", "/jobs/validate", "batch.volcano.sh", "v1alpha1", "jobs",
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, false},
	{"volcano-admission-service-queues-validate", "validatequeue.volcano.sh", "/queues/validate", "scheduling.volcano.sh", "v1beta1", "queues",
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}, false},
}

// registerVolcanoWebhooks creates Volcano's webhook configurations in URL mode for the
// webhook-manager serving at https://addr with the certificate authority caPEM.
func registerVolcanoWebhooks(ctx context.Context, c client.Client, addr string, caPEM []byte) error {
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	for _, h := range volcanoHooks {
		cc := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + h.path), CABundle: caPEM}
		rules := []admissionregistrationv1.RuleWithOperations{{Operations: h.ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{h.group}, APIVersions: []string{h.version}, Resources: []string{h.resource}}}}
		var obj client.Object
		if h.mutating {
			obj = &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: h.config},
				Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: h.name, ClientConfig: cc, Rules: rules, FailurePolicy: &fail,
					SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10)}}}
		} else {
			obj = &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: h.config},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: h.name, ClientConfig: cc, Rules: rules, FailurePolicy: &fail,
					SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10)}}}
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("registering Volcano's webhook configuration %s: %w", h.config, err)
		}
	}
	return nil
}
