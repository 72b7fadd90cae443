package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Names and defaults of the webhook configurations.
const (
	MutatingConfigurationName   = "hyperbatch-mutating"
	ValidatingConfigurationName = "hyperbatch-validating"

	DefaultNamespace   = "hyperbatch-system"
	DefaultServiceName = "hyperbatch-webhook"
	DefaultServicePort = int32(443)
)

// Timeouts of the webhook entries, in seconds (see docs/webhooks.md for the reasoning).
const (
	// PodTimeoutSeconds is short: Pod webhooks fail open, and a hung call delays every Pod creation
	// of an opted-in namespace by this much.
	PodTimeoutSeconds = int32(3)
	// WorkloadTimeoutSeconds is for the workload kinds, which fail closed: long enough to ride out a
	// slow cache read or a GC pause, short of the apiserver's 10s default so clients see the reason.
	WorkloadTimeoutSeconds = int32(5)
)

// ConfigOptions describe where the apiserver reaches the webhook server and which objects it sends.
type ConfigOptions struct {
	// URL, when set, selects URL mode: every webhook calls URL followed by its path, e.g.
	// "https://127.0.0.1:9443" for the local cluster and envtest. Otherwise Service mode is used.
	URL string

	// Service mode: the Service in front of the webhook server. Defaults: ServiceNamespace
	// hyperbatch-system, ServiceName hyperbatch-webhook, ServicePort 443.
	ServiceNamespace string
	ServiceName      string
	ServicePort      int32

	// CABundle (PEM) is written into every clientConfig.caBundle. Leave it empty when an injector
	// fills it (certs.Rotator in self mode, cert-manager's cainjector) or envtest does.
	CABundle []byte

	// Namespace is hyperbatch's own namespace; no webhook admits objects there, nor in kube-system.
	// Default: ServiceNamespace, else hyperbatch-system.
	Namespace string
	// ExcludedNamespaces are further namespaces no webhook admits objects in.
	ExcludedNamespaces []string

	// WorkloadNamespaceSelector picks the namespaces whose workloads (every kind but Pods) the
	// webhooks admit (the exclusions above still apply). nil means every namespace not labelled
	// hyperbatch.dev/pod-webhook=disabled (hbv1.PodWebhookLabelDisabled), the label the
	// namespacelabel controller writes on namespaces no WorkloadPolicy governs; an empty selector
	// means every namespace.
	WorkloadNamespaceSelector *metav1.LabelSelector

	// PodNamespaceSelector picks the namespaces whose Pods the Pod webhooks admit (the exclusions
	// above still apply). nil means namespaces labelled hyperbatch.dev/pod-webhook=enabled (hbv1.PodWebhookLabel);
	// an empty selector means every namespace.
	PodNamespaceSelector *metav1.LabelSelector

	// Kinds are the kinds to register; nil or empty means AllKinds. Keep it equal to Options.Kinds.
	Kinds []Kind

	// Labels and Annotations are set on both configurations, e.g. the annotation
	// cert-manager.io/inject-ca-from: <namespace>/<certificate> for cert-manager's cainjector.
	Labels      map[string]string
	Annotations map[string]string
}

func (o ConfigOptions) withDefaults() ConfigOptions {
	if o.ServiceNamespace == "" {
		o.ServiceNamespace = DefaultNamespace
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.ServicePort == 0 {
		o.ServicePort = DefaultServicePort
	}
	if o.Namespace == "" {
		o.Namespace = o.ServiceNamespace
	}
	if len(o.Kinds) == 0 {
		o.Kinds = AllKinds()
	}
	o.URL = strings.TrimRight(o.URL, "/")
	return o
}

// excluded are the namespaces no webhook admits objects in, in a stable order.
func (o ConfigOptions) excluded() []string {
	out := []string{metav1.NamespaceSystem}
	for _, n := range append([]string{o.Namespace}, o.ExcludedNamespaces...) {
		if n != "" && !contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// entryPolicy is the per-webhook choice documented in docs/webhooks.md.
type entryPolicy struct {
	mutateOps, validateOps []admissionregistrationv1.OperationType
	failurePolicy          admissionregistrationv1.FailurePolicyType
	timeout                int32
}

var createOrUpdate = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}

func policyOf(k Kind) entryPolicy {
	if k == KindWorkloadPolicy {
		// Policies: fail open. A policy written while hyperbatch is down (or in the same Helm release
		// as hyperbatch, before the manager serves) is stored; if its selector is invalid the
		// workloadpolicy controller reports it (Ready=False).
		return entryPolicy{validateOps: createOrUpdate, failurePolicy: admissionregistrationv1.Ignore, timeout: PodTimeoutSeconds}
	}
	if k == KindPod {
		// Pods: fail open and stay short. A CREATE is judged by the mutating webhook
		// (mutator.judgeCreate): one call per Pod, so only UPDATEs have a validating entry.
		return entryPolicy{mutateOps: createOrUpdate, validateOps: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			failurePolicy: admissionregistrationv1.Ignore, timeout: PodTimeoutSeconds}
	}
	// Workloads: fail closed, so no gang runs without its policy's queue, priority and limits.
	return entryPolicy{mutateOps: createOrUpdate, validateOps: createOrUpdate,
		failurePolicy: admissionregistrationv1.Fail, timeout: WorkloadTimeoutSeconds}
}

// EntryName is the name of a kind's CREATE entry in the configurations, e.g.
// "pod.mutate.hyperbatch.dev".
func EntryName(k Kind, mutating bool) string {
	verb := "validate"
	if mutating {
		verb = "mutate"
	}
	return fmt.Sprintf("%s.%s.hyperbatch.dev", strings.ToLower(string(k)), verb)
}

// UpdateEntryName is the name of a kind's UPDATE entry, e.g. "pod-update.mutate.hyperbatch.dev".
func UpdateEntryName(k Kind, mutating bool) string {
	return strings.Replace(EntryName(k, mutating), ".", "-update.", 1)
}

// entryPart is the share of a kind's operations one entry takes. CREATEs and UPDATEs go to separate
// entries so that only UPDATEs carry the match condition: the apiserver converts the object (and
// the old one) to unstructured for every entry with match conditions before it evaluates them,
// which cost it about a tenth of its CPU in a Pod burst although the condition passes every CREATE.
type entryPart struct {
	ops    []admissionregistrationv1.OperationType
	update bool
}

// byOperation splits ops into the CREATE part and the UPDATE part, in that order, leaving out an
// empty one.
func byOperation(ops []admissionregistrationv1.OperationType) []entryPart {
	var out []entryPart
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update} {
		if slices.Contains(ops, op) {
			out = append(out, entryPart{ops: []admissionregistrationv1.OperationType{op}, update: op == admissionregistrationv1.Update})
		}
	}
	return out
}

func (p entryPart) name(k Kind, mutating bool) string {
	if p.update {
		return UpdateEntryName(k, mutating)
	}
	return EntryName(k, mutating)
}

// conditions are the part's match conditions: none for CREATE, the changed-spec-or-annotations
// condition for UPDATE.
func (p entryPart) conditions() []admissionregistrationv1.MatchCondition {
	if p.update {
		return matchConditions()
	}
	return nil
}

// Configurations builds the MutatingWebhookConfiguration hyperbatch-mutating and the
// ValidatingWebhookConfiguration hyperbatch-validating for opts.Kinds: per kind and direction one
// CREATE entry and one UPDATE entry (entryPart), in the order of AllKinds. The result is deterministic (config/webhook/manifests.yaml is
// generated from it).
func Configurations(opts ConfigOptions) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	o := opts.withDefaults()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: copyMap(o.Labels), Annotations: copyMap(o.Annotations)}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: meta(MutatingConfigurationName),
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: meta(ValidatingConfigurationName),
	}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	matchPolicy := admissionregistrationv1.Equivalent
	reinvoke := admissionregistrationv1.IfNeededReinvocationPolicy
	for _, k := range AllKinds() {
		if !hasKind(o.Kinds, k) {
			continue
		}
		spec, pol := specOf(k), policyOf(k)
		rules := func(ops []admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
			scope := admissionregistrationv1.NamespacedScope
			if spec.ClusterScoped {
				scope = admissionregistrationv1.ClusterScope
			}
			return []admissionregistrationv1.RuleWithOperations{{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{APIGroups: []string{spec.GVK.Group}, APIVersions: []string{spec.GVK.Version},
					Resources: []string{spec.Resource}, Scope: &scope},
			}}
		}
		fp, timeout := pol.failurePolicy, pol.timeout
		if spec.MutatePath != "" {
			for _, part := range byOperation(pol.mutateOps) {
				mwc.Webhooks = append(mwc.Webhooks, admissionregistrationv1.MutatingWebhook{
					Name:                    part.name(k, true),
					ClientConfig:            o.clientConfig(spec.MutatePath),
					Rules:                   rules(part.ops),
					FailurePolicy:           &fp,
					MatchPolicy:             &matchPolicy,
					NamespaceSelector:       o.namespaceSelector(k),
					ObjectSelector:          objectSelector(k),
					MatchConditions:         part.conditions(),
					SideEffects:             &sideEffects,
					TimeoutSeconds:          &timeout,
					AdmissionReviewVersions: []string{"v1"},
					ReinvocationPolicy:      &reinvoke,
				})
			}
			if k == KindJobSet && o.WorkloadNamespaceSelector == nil {
				for _, part := range byOperation(pol.mutateOps) {
					mwc.Webhooks = append(mwc.Webhooks, o.selfDeclaredGangJobSetEntry(part, rules(part.ops), fp, timeout))
				}
			}
			if k == KindPodGroup && o.WorkloadNamespaceSelector == nil {
				for _, part := range byOperation(pol.mutateOps) {
					mwc.Webhooks = append(mwc.Webhooks, o.volcanoJobPodGroupEntry(part, rules(part.ops), fp, timeout))
				}
			}
		}
		if spec.ValidatePath == "" {
			continue
		}
		vfp, vtimeout := pol.failurePolicy, pol.timeout
		for _, part := range byOperation(pol.validateOps) {
			vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
				Name:                    part.name(k, false),
				ClientConfig:            o.clientConfig(spec.ValidatePath),
				Rules:                   rules(part.ops),
				FailurePolicy:           &vfp,
				MatchPolicy:             &matchPolicy,
				NamespaceSelector:       o.namespaceSelector(k),
				ObjectSelector:          objectSelector(k),
				MatchConditions:         part.conditions(),
				SideEffects:             &sideEffects,
				TimeoutSeconds:          &vtimeout,
				AdmissionReviewVersions: []string{"v1"},
			})
		}
		if k == KindJobSet {
			vwc.Webhooks = append(vwc.Webhooks, o.jobSetPodGateEntry())
		}
	}
	return mwc, vwc
}

// JobSetPodGateEntryName is the PodGroup gate's entry in hyperbatch-validating.
const JobSetPodGateEntryName = "jobset-pod.validate.hyperbatch.dev"

// jobSetPodGateEntry sends the CREATE of every pod that carries a JobSet name label and
// JobSetGangLabel (the JobSet webhook's mark on a gang JobSet's templates), in every
// namespace but the excluded ones (not only those opted in to the Pod webhooks, and also in
// namespaces labelled pod-webhook=disabled: the gate serves every gang JobSet), to the PodGroup gate. It fails open like the other Pod entries: while the
// webhook is unreachable pods are created without the gate (docs/podgroup.md says what then holds
// the gang together).
func (o ConfigOptions) jobSetPodGateEntry() admissionregistrationv1.ValidatingWebhook {
	scope := admissionregistrationv1.NamespacedScope
	fp, timeout := admissionregistrationv1.Ignore, PodTimeoutSeconds
	sideEffects, matchPolicy := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Equivalent
	return admissionregistrationv1.ValidatingWebhook{
		Name:         JobSetPodGateEntryName,
		ClientConfig: o.clientConfig(ValidateJobSetPodPath),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods"}, Scope: &scope},
		}},
		FailurePolicy:     &fp,
		MatchPolicy:       &matchPolicy,
		NamespaceSelector: o.excludedSelector(),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: jobsetv1alpha2.JobSetNameKey, Operator: metav1.LabelSelectorOpExists},
			{Key: hbv1.JobSetGangLabel, Operator: metav1.LabelSelectorOpExists},
		}},
		SideEffects:             &sideEffects,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}
}

// JobSetGangEntryName and JobSetGangUpdateEntryName are the JobSet mutating entries (CREATE and
// UPDATE) for namespaces no WorkloadPolicy governs.
const (
	JobSetGangEntryName       = "jobset-gang.mutate.hyperbatch.dev"
	JobSetGangUpdateEntryName = "jobset-gang-update.mutate.hyperbatch.dev"
)

// selfDeclaredGangMatchName names the match condition of JobSetGangEntryName.
const selfDeclaredGangMatchName = "self-declared-gang"

// selfDeclaredGangExpression is true for a JobSet that makes itself a gang without any policy
// (defaults.JobSetIsGang): Volcano's queue annotation, or a pod template naming hyperbatch-scheduler
// or volcano. Every step is guarded by has(), so it never errors.
const selfDeclaredGangExpression = "(has(object.metadata.annotations) && " +
	"'scheduling.volcano.sh/queue-name' in object.metadata.annotations) || " +
	"(has(object.spec) && has(object.spec.replicatedJobs) && object.spec.replicatedJobs.exists(r, " +
	"has(r.template) && has(r.template.spec) && has(r.template.spec.template) && " +
	"has(r.template.spec.template.spec) && has(r.template.spec.template.spec.schedulerName) && " +
	"r.template.spec.template.spec.schedulerName in ['hyperbatch-scheduler', 'volcano']))"

// selfDeclaredGangJobSetEntry sends, in namespaces labelled pod-webhook=disabled (no WorkloadPolicy
// governs them, so the JobSet entry skips them under the default WorkloadNamespaceSelector; with a
// selector of the caller's own it is not added), the JobSets that are gangs on their own to
// the same JobSet mutating handler: their pod templates still need scheduling.k8s.io/group-name to
// join the PodGroup controllers/podgroup makes. Other JobSets there never reach hyperbatch.
func (o ConfigOptions) selfDeclaredGangJobSetEntry(part entryPart, rules []admissionregistrationv1.RuleWithOperations,
	fp admissionregistrationv1.FailurePolicyType, timeout int32) admissionregistrationv1.MutatingWebhook {
	return o.ungovernedEntry(part, rules, fp, timeout, ungovernedMatch{
		create: JobSetGangEntryName, update: JobSetGangUpdateEntryName, kind: KindJobSet,
		condition: selfDeclaredGangMatchName, expression: selfDeclaredGangExpression,
	})
}

// ungovernedMatch names an entry of ungovernedEntry: its names for CREATE and UPDATE, the kind whose
// mutating handler serves it, and the match condition that selects its objects.
type ungovernedMatch struct {
	create, update, condition, expression string
	kind                                  Kind
}

// ungovernedEntry is a mutating entry for namespaces labelled pod-webhook=disabled (no WorkloadPolicy
// governs them), limited by a match condition to the objects that need hyperbatch there.
func (o ConfigOptions) ungovernedEntry(part entryPart, rules []admissionregistrationv1.RuleWithOperations,
	fp admissionregistrationv1.FailurePolicyType, timeout int32, m ungovernedMatch) admissionregistrationv1.MutatingWebhook {
	sideEffects, matchPolicy := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Equivalent
	reinvoke := admissionregistrationv1.IfNeededReinvocationPolicy
	sel := o.excludedSelector()
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: hbv1.PodWebhookLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{hbv1.PodWebhookLabelDisabled},
	})
	name := m.create
	if part.update {
		name = m.update
	}
	return admissionregistrationv1.MutatingWebhook{
		Name:              name,
		ClientConfig:      o.clientConfig(specOf(m.kind).MutatePath),
		Rules:             rules,
		FailurePolicy:     &fp,
		MatchPolicy:       &matchPolicy,
		NamespaceSelector: sel,
		MatchConditions: append(part.conditions(), admissionregistrationv1.MatchCondition{
			Name: m.condition, Expression: m.expression,
		}),
		SideEffects:             &sideEffects,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      &reinvoke,
	}
}

// VolcanoJobPodGroupEntryName and VolcanoJobPodGroupUpdateEntryName are the PodGroup mutating
// entries (CREATE and UPDATE) for the Volcano Job PodGroups of namespaces no WorkloadPolicy governs.
const (
	VolcanoJobPodGroupEntryName       = "podgroup-vcjob.mutate.hyperbatch.dev"
	VolcanoJobPodGroupUpdateEntryName = "podgroup-vcjob-update.mutate.hyperbatch.dev"
)

// unboundTopologyMatchName names the match condition of VolcanoJobPodGroupEntryName.
const unboundTopologyMatchName = "volcano-job-podgroup-to-complete"

// unboundTopologyExpression is true for a PodGroup whose controller is a Volcano Job and that lacks
// what Volcano's job controller may drop: a networkTopology that names no tier (Volcano v1.14's
// controller copies mode and highestTierAllowed only, not highestTierName), or no subGroupPolicy
// (the pinned v1.14.0-alpha.0 controller does not turn tasks' partitionPolicy into sub-groups).
// Every step is guarded by has(), so it never errors.
const unboundTopologyExpression = "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, " +
	"has(r.controller) && r.controller && r.apiVersion == 'batch.volcano.sh/v1alpha1' && r.kind == 'Job') && " +
	"(!has(object.spec) || !has(object.spec.subGroupPolicy) || (has(object.spec.networkTopology) && " +
	"!has(object.spec.networkTopology.highestTierName) && !has(object.spec.networkTopology.highestTierAllowed)))"

// volcanoJobPodGroupEntry sends, in namespaces labelled pod-webhook=disabled (no WorkloadPolicy
// governs them, so the PodGroup entry skips them under the default WorkloadNamespaceSelector; with a
// selector of the caller's own it is not added), the PodGroups Volcano's job controller makes with a
// networkTopology but no tier, or without subGroupPolicy, to the same PodGroup mutating handler: the
// PodGroup gets its Job's highestTierName and its tasks' partitions as sub-groups
// (defaults.VolcanoJobPodGroup), which need no policy. Other PodGroups there never reach hyperbatch.
func (o ConfigOptions) volcanoJobPodGroupEntry(part entryPart, rules []admissionregistrationv1.RuleWithOperations,
	fp admissionregistrationv1.FailurePolicyType, timeout int32) admissionregistrationv1.MutatingWebhook {
	return o.ungovernedEntry(part, rules, fp, timeout, ungovernedMatch{
		create: VolcanoJobPodGroupEntryName, update: VolcanoJobPodGroupUpdateEntryName, kind: KindPodGroup,
		condition: unboundTopologyMatchName, expression: unboundTopologyExpression,
	})
}

// excludedSelector keeps kube-system, hyperbatch's namespace and the configured exclusions out.
func (o ConfigOptions) excludedSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: o.excluded(),
	}}}
}

func (o ConfigOptions) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{}
	if len(o.CABundle) > 0 {
		cc.CABundle = append([]byte(nil), o.CABundle...)
	}
	if o.URL != "" {
		u := o.URL + path
		cc.URL = &u
		return cc
	}
	p, port := path, o.ServicePort
	cc.Service = &admissionregistrationv1.ServiceReference{Namespace: o.ServiceNamespace, Name: o.ServiceName, Path: &p, Port: &port}
	return cc
}

// namespaceSelector keeps kube-system, hyperbatch's namespace and the configured exclusions out of
// every webhook, and adds the Pod opt-in selector (Pods) or the workload selector (other kinds).
func (o ConfigOptions) namespaceSelector(k Kind) *metav1.LabelSelector {
	if specOf(k).ClusterScoped {
		return nil // cluster-scoped objects are never skipped by a namespaceSelector
	}
	sel := o.excludedSelector()
	extra := o.WorkloadNamespaceSelector
	if extra == nil {
		extra = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: hbv1.PodWebhookLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{hbv1.PodWebhookLabelDisabled},
		}}}
	}
	if k == KindPod {
		extra = o.PodNamespaceSelector
		if extra == nil {
			extra = &metav1.LabelSelector{MatchLabels: map[string]string{hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}}
		}
	}
	sel.MatchLabels = copyMap(extra.MatchLabels)
	sel.MatchExpressions = append(sel.MatchExpressions, extra.DeepCopy().MatchExpressions...)
	return sel
}

// MatchConditionName names the match condition of every UPDATE entry.
const MatchConditionName = "spec-or-annotations-changed"

// matchConditionExpression lets an UPDATE through only when it changes the object's
// spec or annotations: everything the handlers default, carry over or validate lives there. A
// status write by plain update (Volcano's scheduler writes PodGroup status so: the PodGroup CRD has
// no status subresource), a label, finalizer or owner-reference change never reaches hyperbatch, so
// a hyperbatch outage cannot stall them and they cost no webhook call. has() guards every field, so
// the expression never errors (an error would count as a webhook failure).
const matchConditionExpression = "(has(object.spec) ? object.spec : {}) != (has(oldObject.spec) ? oldObject.spec : {}) || " +
	"(has(object.metadata.annotations) ? object.metadata.annotations : {}) != " +
	"(has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})"

func matchConditions() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{Name: MatchConditionName, Expression: matchConditionExpression}}
}

// objectSelector: Pods made by Volcano's job controller or by a JobSet's Jobs come from templates
// the Volcano Job or JobSet webhook already defaulted and checked, so they are left out.
func objectSelector(k Kind) *metav1.LabelSelector {
	if k != KindPod {
		return nil
	}
	return defaults.WorkloadPodSelector()
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ManifestsHeader starts the generated config/webhook/manifests.yaml.
const ManifestsHeader = "# Code generated by `go run ./webhook/cmd/genmanifests`; DO NOT EDIT.\n" +
	"# hyperbatch's webhook configurations in Service mode (hyperbatch-system/hyperbatch-webhook:443),\n" +
	"# and the ValidatingAdmissionPolicy that checks WorkloadPolicy selectors with no webhook.\n" +
	"# caBundle is left empty: the certs rotator (self mode) or cert-manager's cainjector fills it.\n"

// Manifests renders Configurations(opts), then the WorkloadPolicy selector check
// (WorkloadPolicyCheck: a ValidatingAdmissionPolicy and its binding, which need no webhook), as a
// YAML stream, as written to config/webhook/manifests.yaml.
func Manifests(opts ConfigOptions) ([]byte, error) {
	mwc, vwc := Configurations(opts)
	vap, vapb := WorkloadPolicyCheck()
	var buf bytes.Buffer
	buf.WriteString(ManifestsHeader)
	for _, obj := range []any{mwc, vwc, vap, vapb} {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
			delete(m, "status")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	return buf.Bytes(), nil
}
