package chart

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/webhook"
)

// mode control-plane: the manager reads the Karmada apiserver's kubeconfig from a Secret (as
// volcano-global's controller-manager does), runs with --mode=control-plane, registers its webhooks
// there in URL mode at the release's Service, and touches nothing in the host cluster: no webhook
// configurations, no manager RBAC, no service-account token, no scheduler.
func TestControlPlaneMode(t *testing.T) {
	objs := render(t, "mode=control-plane", "scheduler.enabled=false")
	var dep appsv1.Deployment
	require.True(t, find(t, objs, "Deployment", "hyperbatch-manager", &dep), "no manager Deployment")
	spec := dep.Spec.Template.Spec
	args := spec.Containers[0].Args
	for _, want := range []string{"--mode=control-plane", "--kubeconfig=/etc/karmada/karmada.config",
		"--webhook-url=https://hyperbatch-webhook." + namespace + ".svc:443", "--leader-elect=true", "--cert-mode=self"} {
		assert.Contains(t, args, want, "manager args")
	}
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.False(t, *spec.AutomountServiceAccountToken, "the manager needs no token of the host cluster")
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "karmada-kubeconfig" {
			vol = &spec.Volumes[i]
		}
	}
	require.NotNil(t, vol, "the Karmada kubeconfig volume")
	require.NotNil(t, vol.Secret)
	assert.Equal(t, "karmada-webhook-config", vol.Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "karmada.config", Path: "karmada.config"}}, vol.Secret.Items)
	assert.Contains(t, spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "karmada-kubeconfig", MountPath: "/etc/karmada", ReadOnly: true})
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			t.Errorf("mode control-plane renders %s %s into the host cluster", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "Deployment" && o.GetName() != "hyperbatch-manager" {
			t.Errorf("mode control-plane renders Deployment %s", o.GetName())
		}
	}
	var svc corev1.Service
	assert.True(t, find(t, objs, "Service", "hyperbatch-webhook", &svc), "the webhook Service the Karmada apiserver calls")

	// Another Secret and key.
	objs = render(t, "mode=control-plane", "scheduler.enabled=false", "controlPlane.kubeconfigSecret=karmada-kubeconfig", "controlPlane.kubeconfigKey=kubeconfig")
	require.True(t, find(t, objs, "Deployment", "hyperbatch-manager", &dep))
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--kubeconfig=/etc/karmada/kubeconfig")

	// What the host cluster gets is accepted by a real apiserver, pods included.
	apply(t, objs, true)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "hyperbatch-manager-"}, Spec: dep.Spec.Template.Spec}
	require.NoError(t, env(t).Client.Create(context.Background(), pod, client.DryRunAll), "the apiserver admits a control-plane manager pod")
}

// What mode control-plane cannot do is refused with the value to change.
func TestControlPlaneModeRefusals(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"mode=control-plane"}, "mode control-plane needs scheduler.enabled=false"},
		{[]string{"mode=control-plane", "scheduler.enabled=false", "certs.mode=cert-manager"}, "mode control-plane needs certs.mode=self"},
		{[]string{"mode=control-plane", "scheduler.enabled=false", "controlPlane.kubeconfigSecret="}, "mode control-plane needs controlPlane.kubeconfigSecret"},
		{[]string{"mode=karmada"}, `mode must be standalone, member or control-plane, got "karmada"`},
	} {
		args := []string{"template", "hb", chartDir(), "--kube-version", "1.37.2"}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		_, err := helm(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: want a refusal containing %q, got %v", c.set, c.want, err)
		}
	}
}

// mode member: the manager runs with --mode=member and the chart's webhook configurations are
// webhook.Configurations without the control plane's kinds (HyperJob, PropagationPolicy).
func TestMemberMode(t *testing.T) {
	objs := render(t, "mode=member")
	var dep appsv1.Deployment
	require.True(t, find(t, objs, "Deployment", "hyperbatch-manager", &dep))
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--mode=member")
	var kinds []webhook.Kind
	for _, k := range webhook.AllKinds() {
		if k != defaults.KindHyperJob && k != defaults.KindPropagationPolicy {
			kinds = append(kinds, k)
		}
	}
	wantM, wantV := webhook.Configurations(webhook.ConfigOptions{ServiceNamespace: namespace, Kinds: kinds})
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	require.True(t, find(t, objs, "MutatingWebhookConfiguration", wantM.Name, &gotM))
	require.True(t, find(t, objs, "ValidatingWebhookConfiguration", wantV.Name, &gotV))
	assert.True(t, equality.Semantic.DeepEqual(gotM.Webhooks, wantM.Webhooks), "member mutating webhooks are webhook.Configurations without HyperJob and PropagationPolicy")
	assert.True(t, equality.Semantic.DeepEqual(gotV.Webhooks, wantV.Webhooks), "member validating webhooks are webhook.Configurations without HyperJob and PropagationPolicy")
	for _, w := range append(webhookNames(gotM.Webhooks), webhookNamesV(gotV.Webhooks)...) {
		assert.False(t, strings.HasPrefix(w, "hyperjob") || strings.HasPrefix(w, "propagationpolicy"), "member renders %s", w)
	}
}

func webhookNames(ws []admissionregistrationv1.MutatingWebhook) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

func webhookNamesV(ws []admissionregistrationv1.ValidatingWebhook) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}
