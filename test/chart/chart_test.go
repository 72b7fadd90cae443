// Package chart tests the Helm chart charts/hyperbatch: it lints, renders in both certificate modes,
// agrees with the Go sources of truth (webhook configurations, scheduler profile), and every object
// it renders is accepted by a real kube-apiserver (server-side dry run).
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
	"github.com/hyperbatch/hyperbatch/webhook"
)

const namespace = "hb-system"

func chartDir() string { return filepath.Join(framework.RepoRoot(), "charts", "hyperbatch") }

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(framework.AssetsDir(), "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm is missing from %s: run 'make test-tools' (hack/tools.sh helm)", framework.AssetsDir())
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// render runs helm template with these --set values and decodes every document.
func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return renderArgs(t, args...)
}

// renderArgs runs helm template with more arguments and decodes every document.
func renderArgs(t *testing.T, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", "hb", chartDir(), "--namespace", namespace, "--kube-version", "1.37.2"}, extra...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding rendered chart: %v", err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) bool {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Fatalf("converting %s %s: %v", kind, name, err)
			}
			return true
		}
	}
	return false
}

func TestLint(t *testing.T) {
	if out, err := helm(t, "lint", chartDir(), "--kube-version", "1.37.2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestInvalidCertModeIsRefused(t *testing.T) {
	_, err := helm(t, "template", "hb", chartDir(), "--kube-version", "1.37.2", "--set", "certs.mode=vault")
	if err == nil || !strings.Contains(err.Error(), "certs.mode must be self or cert-manager") {
		t.Fatalf("want a clear refusal of certs.mode=vault, got %v", err)
	}
}

// The CRD shipped in the chart is the generated one.
func TestChartCRDIsGenerated(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "crd", "hyperbatch.dev_workloadpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir(), "crds", "hyperbatch.dev_workloadpolicies.yaml"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("charts/hyperbatch/crds is out of date with config/crd (err %v): run 'make generate'", err)
	}
}

func TestSelfCertMode(t *testing.T) {
	objs := render(t)
	var dep appsv1.Deployment
	if !find(t, objs, "Deployment", "hyperbatch-manager", &dep) {
		t.Fatal("no manager Deployment")
	}
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--cert-mode=self", "--webhook-cert-dir=/certs", "--leader-elect=true", "--enable-webhooks=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	if v := dep.Spec.Template.Spec.Volumes[0]; v.EmptyDir == nil {
		t.Errorf("self mode must give the rotator a writable emptyDir, got %+v", v)
	}
	for _, o := range objs {
		if o.GetKind() == "Certificate" || o.GetKind() == "Issuer" {
			t.Errorf("self mode renders cert-manager %s %s", o.GetKind(), o.GetName())
		}
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("self mode annotates %s %s for cainjector", o.GetKind(), o.GetName())
		}
	}
}

// cert-manager mode issues the serving certificate from a CA Issuer: self-signed Issuer -> CA
// Certificate -> CA Issuer -> serving Certificate, so ca.crt (what cainjector puts in caBundle) is the
// CA and stays the same across renewals of the serving certificate.
func TestCertManagerMode(t *testing.T) {
	objs := render(t, "certs.mode=cert-manager")
	var cert, ca certmanagerv1.Certificate
	require.True(t, find(t, objs, "Certificate", "hyperbatch-webhook", &cert), "no serving Certificate rendered")
	require.True(t, find(t, objs, "Certificate", "hyperbatch-webhook-ca", &ca), "no CA Certificate rendered")
	var selfSigned, caIssuer certmanagerv1.Issuer
	require.True(t, find(t, objs, "Issuer", "hyperbatch-selfsigned", &selfSigned))
	require.True(t, find(t, objs, "Issuer", "hyperbatch-ca", &caIssuer))

	assert.NotNil(t, selfSigned.Spec.SelfSigned, "hyperbatch-selfsigned must be a self-signed Issuer")
	assert.True(t, ca.Spec.IsCA, "the CA Certificate must have isCA")
	assert.Equal(t, "hyperbatch-selfsigned", ca.Spec.IssuerRef.Name, "the CA is signed by the self-signed Issuer")
	require.NotNil(t, caIssuer.Spec.CA, "hyperbatch-ca must be a CA Issuer")
	assert.Equal(t, ca.Spec.SecretName, caIssuer.Spec.CA.SecretName, "the CA Issuer signs with the CA Certificate's Secret")
	assert.Equal(t, "hyperbatch-ca", cert.Spec.IssuerRef.Name, "the serving Certificate is issued by the CA Issuer, not the self-signed one")
	assert.Equal(t, "Issuer", cert.Spec.IssuerRef.Kind)
	assert.False(t, cert.Spec.IsCA)
	assert.Equal(t, "hyperbatch-webhook-tls", cert.Spec.SecretName)
	assert.NotEqual(t, cert.Spec.SecretName, ca.Spec.SecretName, "the CA and the serving certificate need their own Secrets")
	require.NotNil(t, cert.Spec.Duration)
	require.NotNil(t, ca.Spec.Duration)
	assert.Greater(t, ca.Spec.Duration.Duration, cert.Spec.Duration.Duration, "the CA must outlive the serving certificate")
	wantDNS := webhook.DefaultServiceName + "." + namespace + ".svc"
	require.NotEmpty(t, cert.Spec.DNSNames)
	assert.Equal(t, wantDNS, cert.Spec.DNSNames[0])

	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	find(t, objs, "MutatingWebhookConfiguration", webhook.MutatingConfigurationName, &mwc)
	assert.Equal(t, namespace+"/hyperbatch-webhook", mwc.Annotations["cert-manager.io/inject-ca-from"], "cainjector copies the serving Certificate's ca.crt")
	var dep appsv1.Deployment
	find(t, objs, "Deployment", "hyperbatch-manager", &dep)
	if v := dep.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != cert.Spec.SecretName {
		t.Errorf("cert-manager mode must mount the Certificate's Secret, got %+v", v)
	}

	// With an existing issuer, no chain is created.
	objs = render(t, "certs.mode=cert-manager", "certs.certManager.issuerRef.name=corp-ca", "certs.certManager.issuerRef.kind=ClusterIssuer")
	find(t, objs, "Certificate", "hyperbatch-webhook", &cert)
	assert.Equal(t, "corp-ca", cert.Spec.IssuerRef.Name)
	assert.Equal(t, "ClusterIssuer", cert.Spec.IssuerRef.Kind)
	assert.Empty(t, kinds(objs, "Issuer"), "Issuers are rendered although issuerRef is set")
	assert.Len(t, kinds(objs, "Certificate"), 1, "only the serving Certificate is rendered with issuerRef set")
}

// The chart's webhook configurations are exactly webhook.Configurations in Service mode.
func TestWebhooksMatchGo(t *testing.T) {
	objs := render(t)
	wantM, wantV := webhook.Configurations(webhook.ConfigOptions{ServiceNamespace: namespace})
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	if !find(t, objs, "MutatingWebhookConfiguration", wantM.Name, &gotM) || !find(t, objs, "ValidatingWebhookConfiguration", wantV.Name, &gotV) {
		t.Fatal("webhook configurations missing from the chart")
	}
	if !equality.Semantic.DeepEqual(gotM.Webhooks, wantM.Webhooks) {
		t.Errorf("mutating webhooks differ from webhook.Configurations:\nchart %+v\ngo    %+v", gotM.Webhooks, wantM.Webhooks)
	}
	if !equality.Semantic.DeepEqual(gotV.Webhooks, wantV.Webhooks) {
		t.Errorf("validating webhooks differ from webhook.Configurations")
	}
	if objs := render(t, "manager.webhooks=false"); find(t, objs, "MutatingWebhookConfiguration", wantM.Name, &gotM) {
		t.Error("manager.webhooks=false still renders webhook configurations")
	}
}

// admission.mode: policy (and auto on a cluster serving MutatingAdmissionPolicy) leaves the Pod
// entries out of the webhook configurations, exactly as webhook.Configurations without the Pod kind,
// and passes --admission=policy; webhook (and auto without the API) keeps them; a bad value, or
// policy without the API, is refused naming the value.
func TestAdmissionMode(t *testing.T) {
	mapAPI := "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
	var noPod []webhook.Kind
	for _, k := range webhook.AllKinds() {
		if k != webhook.KindPod {
			noPod = append(noPod, k)
		}
	}
	for _, c := range []struct {
		name string
		args []string
		pods bool
	}{
		{"webhook", []string{"--set", "admission.mode=webhook", "--api-versions", mapAPI}, true},
		{"auto without the API", []string{"--set", "admission.mode=auto"}, true},
		{"auto with the API", []string{"--set", "admission.mode=auto", "--api-versions", mapAPI}, false},
		{"policy", []string{"--set", "admission.mode=policy", "--api-versions", mapAPI}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := renderArgs(t, c.args...)
			opts := webhook.ConfigOptions{ServiceNamespace: namespace}
			mode := "policy"
			if c.pods {
				mode = "webhook"
			} else {
				opts.Kinds = noPod
			}
			wantM, wantV := webhook.Configurations(opts)
			var gotM admissionregistrationv1.MutatingWebhookConfiguration
			var gotV admissionregistrationv1.ValidatingWebhookConfiguration
			require.True(t, find(t, objs, "MutatingWebhookConfiguration", wantM.Name, &gotM) && find(t, objs, "ValidatingWebhookConfiguration", wantV.Name, &gotV))
			assert.True(t, equality.Semantic.DeepEqual(gotM.Webhooks, wantM.Webhooks), "mutating entries")
			assert.True(t, equality.Semantic.DeepEqual(gotV.Webhooks, wantV.Webhooks), "validating entries")
			var dep appsv1.Deployment
			require.True(t, find(t, objs, "Deployment", "hyperbatch-manager", &dep))
			assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--admission="+mode)
		})
	}
	_, err := helm(t, "template", "hb", chartDir(), "--kube-version", "1.37.2", "--set", "admission.mode=policies")
	require.ErrorContains(t, err, `admission.mode must be webhook, policy or auto, got "policies"`)
	_, err = helm(t, "template", "hb", chartDir(), "--kube-version", "1.37.2", "--set", "admission.mode=policy")
	require.ErrorContains(t, err, "does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy")
}

// The scheduler profile in the chart is the documented one (docs/scheduler-config.yaml), both ship
// the client rate limits the benchmarks measured, and both name the scheduler's own leader-election
// Lease (never kube-scheduler's). The chart always elects.
func TestSchedulerProfileMatchesDocs(t *testing.T) {
	objs := render(t)
	var cm corev1.ConfigMap
	if !find(t, objs, "ConfigMap", "hyperbatch-scheduler-config", &cm) {
		t.Fatal("no scheduler ConfigMap")
	}
	parse := func(data []byte) map[string]any {
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	docs, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chart, doc := parse([]byte(cm.Data["scheduler-config.yaml"])), parse(docs)
	if got, want := chart["profiles"], doc["profiles"]; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("chart profile differs from docs/scheduler-config.yaml:\nchart %v\ndocs  %v", got, want)
	}
	// The client rate limits the benchmarks measured ship in both.
	for name, conf := range map[string]map[string]any{"chart": chart, "docs": doc} {
		conn, _ := conf["clientConnection"].(map[string]any)
		assert.EqualValues(t, 2000, conn["qps"], "%s clientConnection.qps", name)
		assert.EqualValues(t, 2000, conn["burst"], "%s clientConnection.burst", name)
	}
	le, _ := chart["leaderElection"].(map[string]any)
	assert.Equal(t, map[string]any{"leaderElect": true, "resourceName": "hyperbatch-scheduler", "resourceNamespace": namespace}, le,
		"the chart's scheduler must always elect a leader on its own Lease in the release namespace")
	docLE, _ := doc["leaderElection"].(map[string]any)
	assert.Equal(t, "hyperbatch-scheduler", docLE["resourceName"], "docs/scheduler-config.yaml must name the scheduler's own Lease")
	// The feature gates the local cluster, the tests and the benchmarks run the scheduler with.
	var dep appsv1.Deployment
	require.True(t, find(t, objs, "Deployment", "hyperbatch-scheduler", &dep))
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--feature-gates="+localproc.SchedulerFeatureGates)
	objs = render(t, "scheduler.replicas=1")
	find(t, objs, "ConfigMap", "hyperbatch-scheduler-config", &cm)
	assert.Equal(t, true, parse([]byte(cm.Data["scheduler-config.yaml"]))["leaderElection"].(map[string]any)["leaderElect"], "one replica elects too")
}

// Availability: two scheduler replicas by default, a PodDisruptionBudget per component that selects
// exactly its pods, preferred anti-affinity by hostname, a priority class, the manager always elects
// a leader, and extra excluded namespaces reach the manager.
func TestAvailability(t *testing.T) {
	objs := render(t)
	for _, c := range []string{"manager", "scheduler"} {
		var dep appsv1.Deployment
		require.True(t, find(t, objs, "Deployment", "hyperbatch-"+c, &dep))
		assert.Equal(t, int32(2), *dep.Spec.Replicas, "%s replicas", c)
		pod := dep.Spec.Template.Spec
		assert.Equal(t, "system-cluster-critical", pod.PriorityClassName, "%s priorityClassName", c)
		require.NotNil(t, pod.Affinity, "%s has no affinity", c)
		require.NotNil(t, pod.Affinity.PodAntiAffinity, "%s has no pod anti-affinity", c)
		assert.Empty(t, pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "%s anti-affinity must be preferred, so a one-node cluster still runs it", c)
		pref := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		require.Len(t, pref, 1, c)
		assert.Equal(t, "kubernetes.io/hostname", pref[0].PodAffinityTerm.TopologyKey)
		assert.Equal(t, dep.Spec.Template.Labels, pref[0].PodAffinityTerm.LabelSelector.MatchLabels, "%s anti-affinity must select its own pods", c)

		var pdb policyv1.PodDisruptionBudget
		require.True(t, find(t, objs, "PodDisruptionBudget", "hyperbatch-"+c, &pdb), "no PodDisruptionBudget for %s", c)
		assert.Equal(t, dep.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels, "the %s PDB must select exactly the Deployment's pods", c)
		require.NotNil(t, pdb.Spec.MaxUnavailable)
		assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
		require.NotNil(t, pdb.Spec.UnhealthyPodEvictionPolicy)
		assert.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy)
	}

	var dep appsv1.Deployment
	find(t, render(t, "manager.replicas=1"), "Deployment", "hyperbatch-manager", &dep)
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--leader-elect=true", "one manager replica must elect a leader too")
	assert.NotContains(t, strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "), "--excluded-namespaces", "no flag without extra namespaces")
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--cert-validity=8760h", "self mode passes the serving certificate's lifetime")
	find(t, render(t, "certs.certValidity=5m"), "Deployment", "hyperbatch-manager", &dep)
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--cert-validity=5m")
	find(t, render(t, "certs.mode=cert-manager"), "Deployment", "hyperbatch-manager", &dep)
	assert.NotContains(t, strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "), "--cert-validity", "cert-manager issues the certificate")
	find(t, render(t, "excludedNamespaces={monitoring,istio-system}"), "Deployment", "hyperbatch-manager", &dep)
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--excluded-namespaces=monitoring,istio-system")

	// nodeSelector and tolerations reach both components' pods (chart mode of the local cluster puts
	// them on its real nodes this way); none by default.
	for _, c := range []string{"manager", "scheduler"} {
		find(t, objs, "Deployment", "hyperbatch-"+c, &dep)
		assert.Empty(t, dep.Spec.Template.Spec.NodeSelector, "%s nodeSelector by default", c)
		assert.Empty(t, dep.Spec.Template.Spec.Tolerations, "%s tolerations by default", c)
	}
	placed := renderArgs(t, "--set-string", "nodeSelector.hyperbatch\\.dev/e2e-node=real", "--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists,tolerations[0].effect=NoSchedule")
	for _, c := range []string{"manager", "scheduler"} {
		find(t, placed, "Deployment", "hyperbatch-"+c, &dep)
		assert.Equal(t, map[string]string{"hyperbatch.dev/e2e-node": "real"}, dep.Spec.Template.Spec.NodeSelector, "%s nodeSelector", c)
		assert.Equal(t, []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, dep.Spec.Template.Spec.Tolerations, "%s tolerations", c)
	}

	objs = render(t, "priorityClassName=", "podDisruptionBudget.enabled=false")
	find(t, objs, "Deployment", "hyperbatch-manager", &dep)
	assert.Empty(t, dep.Spec.Template.Spec.PriorityClassName)
	assert.Empty(t, kinds(objs, "PodDisruptionBudget"))
}

// A real kube-apiserver accepts every object the chart renders, in both certificate modes (server-side
// dry run, so schemas, RBAC rules, the ValidatingAdmissionPolicy's CEL, webhook configurations and
// cert-manager's kinds (CRDs from the module cache) are all validated), and admits the Deployments'
// pods in the release namespace (the Priority admission plugin accepts system-cluster-critical there).
func TestRenderedObjectsAcceptedByAPIServer(t *testing.T) {
	e := env(t)
	for _, mode := range []string{"self", "cert-manager"} {
		objs := render(t, "certs.mode="+mode)
		require.GreaterOrEqual(t, len(objs), 10)
		apply(t, objs, true)
		for _, o := range kinds(objs, "Deployment") {
			var dep appsv1.Deployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: dep.Name + "-"}, Spec: dep.Spec.Template.Spec}
			if err := e.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
				t.Errorf("%s mode: the apiserver refuses a %s pod: %v", mode, dep.Name, err)
			}
		}
	}
}
