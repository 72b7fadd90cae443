package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/webhook"
)

// --excluded-namespaces adds to kube-system and hyperbatch's own namespace; a name that is not a
// namespace is refused with the flag's name and an example.
func TestExcludedNamespaces(t *testing.T) {
	got, err := excludedNamespaces("hyperbatch-system", " monitoring,,ingress-nginx,kube-system ")
	require.NoError(t, err)
	assert.Equal(t, []string{"kube-system", "hyperbatch-system", "monitoring", "ingress-nginx"}, got)

	got, err = excludedNamespaces("hb", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"kube-system", "hb"}, got)

	_, err = excludedNamespaces("hb", "monitoring,Bad_NS")
	require.ErrorContains(t, err, `--excluded-namespaces: "Bad_NS" is not a namespace name`)
}

// --webhook-kinds selects the kinds whose webhooks are served; a bad value names the flag and the
// valid kinds.
func TestSelectedWebhookKinds(t *testing.T) {
	got, err := selectedWebhookKinds("*")
	require.NoError(t, err)
	assert.Equal(t, webhook.AllKinds(), got)

	got, err = selectedWebhookKinds(" HyperJob, volcanojob ,PropagationPolicy,HyperJob")
	require.NoError(t, err)
	assert.Equal(t, []webhook.Kind{webhook.KindHyperJob, webhook.KindVolcanoJob, webhook.KindPropagationPolicy}, got)

	_, err = selectedWebhookKinds("HyperJob,Job")
	require.EqualError(t, err, `--webhook-kinds: unknown kind "Job"; valid kinds are Pod, VolcanoJob, PodGroup, JobSet, HyperJob, TrainJob, PropagationPolicy, WorkloadPolicy, or * for all`)

	_, err = selectedWebhookKinds(" , ")
	require.ErrorContains(t, err, "--webhook-kinds: no kind given; valid kinds are Pod, VolcanoJob")
}

// --mode=control-plane picks the control plane's controllers and webhook kinds unless given, and
// refuses what needs pods with the flag's name and the valid choices; a bad mode is refused.
func TestApplyMode(t *testing.T) {
	o := options{mode: modeControlPlane, controllers: "*", webhookKinds: "*"}
	require.NoError(t, applyMode(&o, map[string]bool{}))
	assert.Equal(t, "hyperjob,lifecycle,workloadpolicy", o.controllers)
	assert.Equal(t, "HyperJob,VolcanoJob,PropagationPolicy", o.webhookKinds)

	o = options{mode: modeControlPlane, controllers: "hyperjob", webhookKinds: "HyperJob,WorkloadPolicy"}
	require.NoError(t, applyMode(&o, map[string]bool{"controllers": true, "webhook-kinds": true}))
	assert.Equal(t, "hyperjob", o.controllers)

	o = options{mode: modeControlPlane, controllers: "hyperjob,podgroup", webhookKinds: "*"}
	require.EqualError(t, applyMode(&o, map[string]bool{"controllers": true}),
		`--controllers: controller "podgroup" does not run on a Karmada control plane (no pod, PodGroup or node exists there); with --mode=control-plane choose among hyperjob,lifecycle,workloadpolicy`)

	o = options{mode: modeControlPlane, controllers: "*", webhookKinds: "HyperJob,Pod"}
	require.EqualError(t, applyMode(&o, map[string]bool{"webhook-kinds": true}),
		"--webhook-kinds: kind Pod is not admitted on a Karmada control plane (--mode=control-plane); choose among HyperJob,VolcanoJob,PropagationPolicy,WorkloadPolicy")

	o = options{mode: modeStandalone, controllers: "*", webhookKinds: "*"}
	require.NoError(t, applyMode(&o, map[string]bool{}))
	assert.Equal(t, "*", o.controllers, "standalone mode leaves the flags alone")

	// A member runs everything but the HyperJob split.
	o = options{mode: modeMember, controllers: "*", webhookKinds: "*"}
	require.NoError(t, applyMode(&o, map[string]bool{}))
	assert.Equal(t, "admissionparams,hypernode,lifecycle,namespacelabel,podgroup,podgroupstatus,workloadpolicy", o.controllers)
	assert.Equal(t, "Pod,VolcanoJob,PodGroup,JobSet,TrainJob,WorkloadPolicy", o.webhookKinds)
	o = options{mode: modeMember, controllers: "podgroup,hyperjob", webhookKinds: "*"}
	require.EqualError(t, applyMode(&o, map[string]bool{"controllers": true}),
		`--controllers: controller "hyperjob" runs on the Karmada control plane (--mode=control-plane), not in a member cluster (--mode=member): HyperJobs are split there`)
	o = options{mode: modeMember, controllers: "*", webhookKinds: "Pod,HyperJob"}
	require.EqualError(t, applyMode(&o, map[string]bool{"webhook-kinds": true}),
		"--webhook-kinds: kind HyperJob is admitted on the Karmada control plane (--mode=control-plane), not in a member cluster (--mode=member)")

	o = options{mode: "karmada"}
	require.ErrorContains(t, applyMode(&o, nil), `--mode "karmada" is not one of standalone (one cluster), member`)
}

// In policy mode the kinds the admission policies cover leave the webhook configurations; the
// other modes keep them all. --admission takes webhook, policy or auto only.
func TestAdmissionModeKinds(t *testing.T) {
	all, err := selectedWebhookKinds("*")
	require.NoError(t, err)
	require.Equal(t, all, webhookKindsFor(admissionWebhook, all))
	got := webhookKindsFor(admissionPolicy, all)
	require.NotContains(t, got, defaults.KindPod)
	require.Len(t, got, len(all)-1)
	_, _, err = resolveAdmission(nil, "policies")
	require.EqualError(t, err, `--admission "policies" is not one of webhook, policy, auto`)
	mode, _, err := resolveAdmission(nil, "webhook")
	require.NoError(t, err)
	require.Equal(t, admissionWebhook, mode)
}

// A serving certificate shorter than minCertValidity is refused, naming the flag; certificates from
// cert-manager are not the manager's to time.
func TestCertValidityTooShort(t *testing.T) {
	_, err := webhookServer(&rest.Config{}, options{certMode: "self", certValidity: time.Minute, webhookCertDir: t.TempDir()}, &manager.Options{})
	if err == nil || !strings.Contains(err.Error(), "--cert-validity 1m0s is too short") {
		t.Fatalf("want an error naming --cert-validity, got %v", err)
	}
	if _, err := webhookServer(&rest.Config{}, options{certMode: "self", certValidity: minCertValidity, webhookCertDir: t.TempDir(), namespace: "hyperbatch-system", webhookService: "hyperbatch-webhook"}, &manager.Options{}); err != nil {
		t.Fatalf("--cert-validity %s: %v", minCertValidity, err)
	}
}
