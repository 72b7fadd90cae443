package localproc

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The neighbours' webhook configurations, in URL mode on loopback (a local cluster has no Services).
// Volcano's webhook-manager only injects the caBundle into configurations that already exist, and the
// JobSet controller with its cert rotation off expects them installed.

type hook struct {
	config, name, path, group, version, resource string
	ops                                          []admissionregistrationv1.OperationType
	mutating                                     bool
}

var (
	create       = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	createUpdate = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
)

// volcanoHooks mirror the webhooks of Volcano's Helm chart (installer/helm/chart/volcano/templates/
// webhooks.yaml, v1.14.0-alpha.0) for VolcanoAdmissions; the configuration names are the ones the
// webhook-manager looks up ("volcano-admission-service" + the path with / replaced by -).
var volcanoHooks = []hook{
	{"volcano-admission-service-jobs-mutate", "mutatejob.volcano.sh", "/jobs/mutate", "batch.volcano.sh", "v1alpha1", "jobs", create, true},
	{"volcano-admission-service-podgroups-mutate", "mutatepodgroup.volcano.sh", "/podgroups/mutate", "scheduling.volcano.sh", "v1beta1", "podgroups", create, true},
	{"volcano-admission-service-queues-mutate", "mutatequeue.volcano.sh", "/queues/mutate", "scheduling.volcano.sh", "v1beta1", "queues", create, true},
	{"volcano-admission-service-jobs-validate", "validatejob.volcano.sh", "/jobs/validate", "batch.volcano.sh", "v1alpha1", "jobs", createUpdate, false},
	{"volcano-admission-service-queues-validate", "validatequeue.volcano.sh", "/queues/validate", "scheduling.volcano.sh", "v1beta1", "queues",
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}, false},
}

// jobSetHooks are the JobSet controller's JobSet webhooks (kubebuilder markers in
// sigs.k8s.io/jobset v0.11.0 pkg/webhooks/jobset_webhook.go). Its pod webhooks (exclusive placement)
// are added by WithJobSetPodWebhooks.
var jobSetHooks = []hook{
	{"jobset-mutating-webhook-configuration", "mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io", "v1alpha2", "jobsets", create, true},
	{"jobset-validating-webhook-configuration", "vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io", "v1alpha2", "jobsets", createUpdate, false},
}

// VolcanoWebhookConfigs are Volcano's webhook configurations for a webhook-manager serving at addr
// (host:port) with a certificate ca signed; suffix is appended to their names, labels set on them.
func VolcanoWebhookConfigs(addr string, ca []byte, suffix string, labels map[string]string) []client.Object {
	return webhookConfigs(volcanoHooks, addr, ca, suffix, labels)
}

// JobSetWebhookConfigs are the JobSet controller's JobSet webhook configurations for its webhook
// server at addr; suffix is appended to their names, labels set on them.
func JobSetWebhookConfigs(addr string, ca []byte, suffix string, labels map[string]string) []client.Object {
	return webhookConfigs(jobSetHooks, addr, ca, suffix, labels)
}

func webhookConfigs(hooks []hook, addr string, ca []byte, suffix string, labels map[string]string) []client.Object {
	var out []client.Object
	for _, h := range hooks {
		cc := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + h.path), CABundle: ca}
		rules := []admissionregistrationv1.RuleWithOperations{{
			Operations: h.ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{h.group}, APIVersions: []string{h.version}, Resources: []string{h.resource},
			},
		}}
		fail := admissionregistrationv1.Fail
		none := admissionregistrationv1.SideEffectClassNone
		if h.mutating {
			out = append(out, &admissionregistrationv1.MutatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: h.config + suffix, Labels: labels},
				Webhooks: []admissionregistrationv1.MutatingWebhook{{
					Name: h.name, ClientConfig: cc, Rules: rules, FailurePolicy: &fail, SideEffects: &none,
					AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
				}},
			})
			continue
		}
		out = append(out, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: h.config + suffix, Labels: labels},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: h.name, ClientConfig: cc, Rules: rules, FailurePolicy: &fail, SideEffects: &none,
				AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
			}},
		})
	}
	return out
}

// WithJobSetPodWebhooks adds the JobSet controller's pod webhooks (mpod.kb.io, vpod.kb.io: kubebuilder
// markers in sigs.k8s.io/jobset v0.11.0 pkg/webhooks/pod_*_webhook.go; the objectSelector of its Helm
// chart, charts/jobset/templates/webhook/) to its mutating and validating configurations in objs, as
// a user's cluster has them: they implement exclusive placement (leader pods get the topology
// affinity, follower pods are refused until their leader is scheduled), which without them is
// silently ignored.
func WithJobSetPodWebhooks(objs []client.Object, addr string, ca []byte) []client.Object {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: create,
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	jobSetPods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "jobset.sigs.k8s.io/jobset-name", Operator: metav1.LabelSelectorOpExists}}}
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + path), CABundle: ca}
	}
	for _, o := range objs {
		switch c := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			c.Webhooks = append(c.Webhooks, admissionregistrationv1.MutatingWebhook{
				Name: "mpod.kb.io", ClientConfig: cc("/mutate--v1-pod"), Rules: rules, ObjectSelector: jobSetPods,
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
			})
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{
				Name: "vpod.kb.io", ClientConfig: cc("/validate--v1-pod"), Rules: rules, ObjectSelector: jobSetPods,
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
			})
		}
	}
	return objs
}
