package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

func warningClient(t *testing.T) (client.Client, *framework.Warnings) {
	t.Helper()
	return framework.WarningClient(t, env.Config)
}

// pair is one namespace profile in both modes.
type pair struct{ webhook, policy string }

// profile creates two namespaces with labels and annotations, one per mode, both opted in, and
// waits until the policy one has its params.
func profile(t *testing.T, name string, labels, annotations map[string]string) pair {
	t.Helper()
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	p := pair{webhook: "wh-" + name, policy: "pol-" + name}
	for ns, mode := range map[string]string{p.webhook: "webhook", p.policy: "policy"} {
		l := map[string]string{modeLabel: mode, hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}
		for k, v := range labels {
			l[k] = v
		}
		require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: l, Annotations: annotations}}))
	}
	waitParams(t, p.policy)
	return p
}

// waitParams waits for the namespace's param ConfigMap, then for the apiserver to apply the
// policies there (a dry-run Pod is mutated: the policies' informers have the ConfigMap).
func waitParams(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	var cm corev1.ConfigMap
	require.NoError(t, wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: admissionpolicy.ParamsName}, &cm)
		return err == nil, client.IgnoreNotFound(err)
	}), "params of %s", ns)
	if strings.TrimSpace(cm.Data[admissionpolicy.KeyPodDefaultedByList]) == "" && len(cm.Data) <= 1 {
		return // nothing to default there: no positive signal to wait for
	}
	var last error
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod := bare("probe")
		pod.Namespace = ns
		if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
			// A refusal by the policies (a missing PriorityClass, a queue not allowed) says they run.
			last = err
			return strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || strings.Contains(err.Error(), missingClassRefusal), nil
		}
		return pod.Annotations[hbv1.DefaultedByAnnotation] != "", nil
	}), "the policies never applied in %s (last refusal: %v)", ns, last)
}

func bare(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

// outcome is what one create (or update) gave: the stored object, normalized, or the error; and
// the warnings.
type outcome struct {
	obj      map[string]any
	code     int32
	err      string
	warnings []string
}

// normalize drops what differs between any two creations and writes the namespace as NS.
func normalize(t *testing.T, obj client.Object, ns string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	raw = []byte(strings.ReplaceAll(string(raw), ns, "NS"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	meta := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
		delete(meta, k)
	}
	return m
}

func create(t *testing.T, c client.Client, w *framework.Warnings, ns string, pod *corev1.Pod) outcome {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	pod = pod.DeepCopy()
	pod.Namespace = ns
	w.Take()
	err := c.Create(ctx, pod)
	return result(t, c, w, ns, pod, err)
}

// result is the outcome of writing pod: the refusal, or the stored Pod, normalized.
func result(t *testing.T, c client.Client, w *framework.Warnings, ns string, pod *corev1.Pod, err error) outcome {
	t.Helper()
	return resultOf(t, c, w, ns, client.ObjectKeyFromObject(pod), &corev1.Pod{}, err)
}

// resultOf is the outcome of writing the object at key: the warnings and the refusal (err), or the
// object read back into got, normalized, with the namespace written NS.
func resultOf(t *testing.T, c client.Client, w *framework.Warnings, ns string, key client.ObjectKey, got client.Object, err error) outcome {
	t.Helper()
	o := outcome{warnings: w.Take()}
	for i := range o.warnings {
		o.warnings[i] = strings.ReplaceAll(o.warnings[i], ns, "NS")
	}
	if err != nil {
		o.err = strings.ReplaceAll(err.Error(), ns, "NS")
		if st, ok := err.(apierrors.APIStatus); ok { //nolint:errorlint // the status of the apiserver's answer
			o.code = st.Status().Code
		}
		return o
	}
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	require.NoError(t, c.Get(ctx, key, got))
	o.obj = normalize(t, got, ns)
	return o
}

// equivalent asserts the policy mode's outcome is the webhook mode's, up to the differences
// docs/webhooks.md lists: a refusal has the same status code and carries the webhook's message; a
// warning carries the webhook's text after the apiserver's "Validation failed for
// ValidatingAdmissionPolicy ..." prefix.
func equivalent(t *testing.T, what string, in *corev1.Pod, wh, pol outcome) {
	t.Helper()
	if wh.err != "" || pol.err != "" {
		// A refused Pod gets no warning the webhook does not give: in particular no "defaulted"
		// warning, which would read as if the Pod had been created.
		for _, w := range pol.warnings {
			assert.Contains(t, wh.warnings, stripPolicyWarning(w), "%s: a warning with the refusal the webhook did not give (refused: %s)", what, pol.err)
		}
		if assert.NotEmpty(t, wh.err, "%s: refused only in policy mode: %s", what, pol.err) &&
			assert.NotEmpty(t, pol.err, "%s: refused only in webhook mode: %s", what, wh.err) {
			if strings.Contains(wh.err, `admission webhook "pod.mutate.hyperbatch.dev" denied`) && !strings.Contains(pol.err, "ValidatingAdmissionPolicy") {
				// Difference 5 of docs/webhooks.md: a Pod with more than one fault. The webhook
				// judges a CREATE while mutating, before the apiserver validates the Pod and before
				// the Priority plugin's check; the policies judge after both.
				assert.Contains(t, []int32{403, 422}, pol.code, "%s: status code of %q", what, pol.err)
				return
			}
			if strings.Contains(wh.err, "does not exist; it is the default priorityClassName") {
				// Difference 1 of docs/webhooks.md: the Priority admission plugin refuses first.
				assert.Contains(t, pol.err, missingClassRefusal, "%s: refusal", what)
				assert.Equal(t, int32(403), pol.code, "%s: status code", what)
				return
			}
			assert.Equal(t, wh.code, pol.code, "%s: status code (webhook %q, policy %q)", what, wh.err, pol.err)
			assert.Contains(t, pol.err, webhookMessage(wh.err), "%s: refusal", what)
		}
		return
	}
	assert.Equal(t, wh.obj, pol.obj, "%s: stored Pod", what)
	var polWarnings []string
	for _, w := range pol.warnings {
		polWarnings = append(polWarnings, stripPolicyWarning(w))
	}
	if strings.TrimSpace(in.Annotations[hbv1.DefaultedByAnnotation]) != "" {
		// Difference 2 of docs/webhooks.md: the "defaulted" warning is given only when the merged
		// defaulted-by value is one the namespace's params name.
		for _, w := range polWarnings {
			assert.Contains(t, wh.warnings, w, "%s: a warning the webhook did not give", what)
		}
		for _, w := range wh.warnings {
			if !strings.HasPrefix(w, defaults.WarningPrefix+"defaulted ") {
				assert.Contains(t, polWarnings, w, "%s: a warning the policy did not give", what)
			}
		}
		return
	}
	assert.Equal(t, wh.warnings, polWarnings, "%s: warnings", what)
}

// missingClassRefusal starts the Priority admission plugin's refusal of a Pod whose
// priorityClassName names no PriorityClass; in policy mode it refuses a filled class that does not
// exist before the ValidatingAdmissionPolicies run.
const missingClassRefusal = "no PriorityClass with name"

// webhookMessage is the field errors of a webhook refusal: `Pod "x" is invalid: <field errors>`.
func webhookMessage(err string) string {
	if _, rest, ok := strings.Cut(err, " is invalid: "); ok {
		return strings.TrimPrefix(strings.TrimSuffix(rest, "]"), "[")
	}
	if _, rest, ok := strings.Cut(err, "denied the request: "); ok {
		return rest
	}
	return err
}

// stripPolicyWarning removes the apiserver's prefix of a Warn action's message.
func stripPolicyWarning(w string) string {
	if i := strings.Index(w, defaults.WarningPrefix); i >= 0 {
		return w[i:]
	}
	return w
}

// podCorpus are Pods that exercise every rule of the Pod engine and the Pod checks.
func podCorpus() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	add := func(name string, edit func(p *corev1.Pod)) {
		p := bare(name)
		if edit != nil {
			edit(p)
		}
		out[name] = p
	}
	ann := func(kv ...string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				p.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	q, g := defaults.QueueNameAnnotation, defaults.GroupNameAnnotation
	mode, tier := defaults.NetworkTopologyModeAnnotation, defaults.NetworkTopologyHighestTierAnnotation
	add("bare", nil)
	add("queue-set", ann(q, "shared"))
	add("queue-blank", ann(q, "  "))
	add("queue-empty", ann(q, ""))
	add("queue-spaces", ann(q, " team-a "))
	add("queue-ns-spaces", ann(q, "namespace/ soft"))
	add("queue-ns", ann(q, "namespace/soft"))
	add("queue-refused", ann(q, "gpu"))
	add("queue-refused-grouped", ann(q, "gpu", g, "pg"))
	add("queue-grouped-blank-group", ann(q, "gpu", g, " "))
	add("mode-set", ann(mode, "soft"))
	add("tier-set", ann(tier, "1"))
	add("mode-empty", ann(mode, ""))
	add("defaulted-by-other", ann(hbv1.DefaultedByAnnotation, "jobset:js/queue"))
	add("defaulted-by-same", ann(hbv1.DefaultedByAnnotation, "team-a/queue"))
	add("defaulted-by-blank", ann(hbv1.DefaultedByAnnotation, " "))
	add("class-set", func(p *corev1.Pod) { p.Spec.PriorityClassName = "batch-high" })
	add("scheduler-set", func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" })
	add("scheduler-default", func(p *corev1.Pod) { p.Spec.SchedulerName = corev1.DefaultSchedulerName })
	add("all-set", func(p *corev1.Pod) {
		ann(q, "team-a", mode, "hard", tier, "2")(p)
		p.Spec.PriorityClassName, p.Spec.SchedulerName = "batch-normal", "hyperbatch-scheduler"
	})
	add("node-name", func(p *corev1.Pod) { p.Spec.NodeName = "n1" })
	add("node-selector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "n2"} })
	add("node-selector-other", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "z"} })
	affinity := func(terms ...corev1.NodeSelectorTerm) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	byName := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n3", "n4"}}}}
	byHost := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n5"}}}}
	byZone := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z"}}}}
	add("affinity-names", affinity(byName, byHost))
	add("affinity-zone", affinity(byName, byZone))
	add("mirror", ann(defaults.MirrorPodAnnotation, "x"))
	add("daemonset", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u", Controller: ptr.To(true)}}
	})
	add("daemonset-not-controller", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u"}}
	})
	// Pods of Volcano Jobs and JobSets: no admission call in either mode (objectSelector).
	add("volcano-job-pod", func(p *corev1.Pod) { p.Labels = map[string]string{"volcano.sh/job-name": "j"} })
	add("jobset-pod", func(p *corev1.Pod) { p.Labels = map[string]string{"jobset.sigs.k8s.io/jobset-name": "js"} })
	add("node-owner", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "u"}}
	})
	// The Pod seeds of the fuzz targets (internal/defaults FuzzPodDefaults, webhook FuzzHandlers),
	// each given a container.
	for i, raw := range []string{
		`{"metadata":{"annotations":{"scheduling.volcano.sh/queue-name":" ","hyperbatch.dev/defaulted-by":"x/queue;;y"}},` +
			`"spec":{"priority":0,"preemptionPolicy":"Never","schedulerName":"default-scheduler"}}`,
		`{"metadata":{"annotations":{"scheduling.volcano.sh/queue-name":" ","hyperbatch.dev/defaulted-by":"x/queue;;y"}},` +
			`"spec":{"preemptionPolicy":"Never","schedulerName":"default-scheduler"}}`,
		`{"metadata":{"annotations":{"volcano.sh/network-topology-mode":"soft"}},"spec":{"priorityClassName":"mine"}}`,
		`{"metadata":{"annotations":{"volcano.sh/network-topology-mode":"soft"}},"spec":{"priorityClassName":"batch-high"}}`,
		`{"metadata":{"name":"p","namespace":"a"},"spec":{"schedulerName":"default-scheduler","priority":0}}`,
		`{"metadata":{"annotations":{"hyperbatch.dev/defaulted-by":"team-a/groupName;soft/queue"}}}`,
	} {
		p := bare("")
		if err := json.Unmarshal([]byte(raw), p); err != nil {
			panic(err)
		}
		p.Name, p.Namespace = fmt.Sprintf("fuzz-seed-%d", i), ""
		out[p.Name] = p
	}
	return out
}

// profiles are namespaces that reach every rule: each policy of the fixtures, a namespace queue
// annotation, a fail-closed invalid policy, and no policy.
func profiles(t *testing.T) map[string]pair {
	return map[string]pair{
		"team-a":    profile(t, "team-a", map[string]string{"team": "a"}, nil),
		"ns-queue":  profile(t, "ns-queue", map[string]string{"team": "a"}, map[string]string{defaults.QueueNameAnnotation: " from-ns "}),
		"soft":      profile(t, "soft", map[string]string{"team": "soft"}, nil),
		"nopc":      profile(t, "nopc", map[string]string{"team": "nopc"}, nil),
		"invalid":   profile(t, "invalid", map[string]string{"team": "b"}, nil),
		"ds":        profile(t, "ds", map[string]string{"team": "ds"}, nil),
		"tier":      profile(t, "tier", map[string]string{"team": "tier"}, nil),
		"no-policy": profile(t, "no-policy", nil, nil),
	}
}

// TestEquivalentPods creates every Pod of the corpus in every profile's two namespaces and holds
// the policy mode's stored Pod, refusal and warnings to the webhook mode's.
func TestEquivalentPods(t *testing.T) {
	c, w := warningClient(t)
	corpus := podCorpus()
	for pname, p := range profiles(t) {
		for name, pod := range corpus {
			what := pname + "/" + name
			equivalent(t, what, pod, create(t, c, w, p.webhook, pod), create(t, c, w, p.policy, pod))
		}
	}
}
