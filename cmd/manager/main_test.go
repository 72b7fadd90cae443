package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.EqualError(t, err, `--webhook-kinds: unknown kind "Job"; valid kinds are Pod, VolcanoJob, PodGroup, JobSet, HyperJob, PropagationPolicy, WorkloadPolicy, or * for all`)

	_, err = selectedWebhookKinds(" , ")
	require.ErrorContains(t, err, "--webhook-kinds: no kind given; valid kinds are Pod, VolcanoJob")
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
