package admissionpolicy

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

type variable struct{ name, expression string }

type validation struct{ expression, message, reason string }

// Program is what the policies of one kind are made of.
type Program struct {
	Kind defaults.Kind
	// createVars/updateVars are the mutations' variables; create is the CREATE mutation's JSON
	// patch, update the UPDATE mutation's apply configuration.
	createVars, updateVars []variable
	create, update         string
	checkVars, warnVars    []variable
	checks, warnings       []validation
}

// programs builds the policies of each kind whose registry row says the admission policies cover
// it (workload.Admission.PolicyCovered); TestEveryCoveredKindHasAProgram checks there is one.
var programs = map[defaults.Kind]func() Program{
	defaults.KindPod: func() Program {
		return Program{
			Kind:       defaults.KindPod,
			createVars: podCreateVariables(),
			updateVars: append(podPredicates("object", "new"), podPredicates("oldObject", "old")...),
			create:     podCreatePatch(),
			update:     podUpdateApply(),
			checkVars:  podCheckVariables(),
			checks:     podChecks(),
			warnVars:   podWarningVariables(),
			warnings:   podWarnings(),
		}
	},
}

// Programs are the kinds the admission policies cover, in registry order. Every other kind keeps
// its webhook (Uncovered says why).
func Programs() []Program {
	var out []Program
	for _, w := range workload.All() {
		if !w.Admission.PolicyCovered() {
			continue
		}
		if p, ok := programs[w.Kind]; ok {
			out = append(out, p())
		}
	}
	return out
}

// Uncovered are the kinds of the registry that keep their webhook in policy mode, with the reason
// (workload.Admission.Uncovered).
var Uncovered = func() map[defaults.Kind]string {
	out := map[defaults.Kind]string{}
	for _, w := range workload.All() {
		if !w.Admission.PolicyCovered() {
			out[w.Kind] = w.Admission.Uncovered
		}
	}
	return out
}()

// Options say where the policies apply.
type Options struct {
	// Excluded are namespaces no policy applies in (kube-system, hyperbatch's own, --excluded-namespaces).
	Excluded []string
	// Labels are set on every generated object.
	Labels map[string]string
	// ParamsWriters are the users allowed to write the param ConfigMaps (the manager's own user,
	// e.g. system:serviceaccount:hyperbatch-system:hyperbatch-manager). When set, a guard policy
	// refuses everyone else's create, update or delete of a ConfigMap named ParamsName, except while
	// its namespace is being deleted; without it a namespace's own users could rewrite their
	// defaults and allowed queues.
	ParamsWriters []string
	// NoWarnings leaves out the Warn policies (WarnPolicyName): no "defaulted" or topology-skip
	// warning is given (the manager's --admission-warnings=false).
	NoWarnings bool
	// NamespaceSelector, when set, replaces the opt-in label hyperbatch.dev/pod-webhook=enabled as
	// the test of which namespaces the policies apply in (the exclusions still apply), as
	// webhook.ConfigOptions.PodNamespaceSelector does for the Pod webhooks.
	NamespaceSelector *metav1.LabelSelector
}

// CreatePolicyName names the MutatingAdmissionPolicy (and binding) of a kind's CREATE defaults.
func CreatePolicyName(k defaults.Kind) string {
	return "hyperbatch-" + strings.ToLower(string(k)) + "-defaults"
}

// UpdatePolicyName names the MutatingAdmissionPolicy (and binding) of a kind's UPDATE carry-over.
func UpdatePolicyName(k defaults.Kind) string {
	return "hyperbatch-" + strings.ToLower(string(k)) + "-carryover"
}

// CheckPolicyName names the ValidatingAdmissionPolicy (and binding, Deny) of a kind's checks.
func CheckPolicyName(k defaults.Kind) string {
	return "hyperbatch-" + strings.ToLower(string(k)) + "-checks"
}

// WarnPolicyName names the ValidatingAdmissionPolicy (and binding, Warn) of a kind's warnings.
func WarnPolicyName(k defaults.Kind) string {
	return "hyperbatch-" + strings.ToLower(string(k)) + "-warnings"
}

// ManagedByLabel marks every generated object (value "hyperbatch"), so a switch back to webhook
// mode finds and deletes them.
const ManagedByLabel = "hyperbatch.dev/admission-policy"

// Objects are the MutatingAdmissionPolicies, ValidatingAdmissionPolicies and their bindings of
// every Program: policies first, then bindings, so applying them in order never binds a policy
// that does not exist yet.
func Objects(o Options) []client.Object {
	var pols, binds []client.Object
	for _, p := range Programs() {
		spec, _ := defaults.LookupKind(p.Kind)
		match := func(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
			scope := admissionregistrationv1.NamespacedScope
			return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
					APIGroups: []string{spec.GVK.Group}, APIVersions: []string{spec.GVK.Version}, Resources: []string{spec.Resource}, Scope: &scope}},
			}}}
		}
		bindMatch := &admissionregistrationv1.MatchResources{
			NamespaceSelector: o.namespaceSelector(),
			ObjectSelector:    objectSelector(p.Kind),
		}
		fp := admissionregistrationv1.Ignore // as the Pod webhooks: fail open
		paramKind := &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		allow := admissionregistrationv1.AllowAction
		paramRef := &admissionregistrationv1.ParamRef{Name: ParamsName, ParameterNotFoundAction: &allow}

		// The carry-over leaves a terminating Pod alone, as the webhook does on UPDATE. CREATE has no
		// such test (the webhook has none either), and no match condition at all: the apiserver
		// builds a CEL activation of its own for a policy's match conditions, converting the params
		// again (docs/webhooks.md, "Cost").
		notDeleting := []admissionregistrationv1.MatchCondition{{Name: "not-deleting", Expression: "!has(object.metadata.deletionTimestamp)"}}
		mutating := func(name string, vars []variable, m admissionregistrationv1.Mutation, conds []admissionregistrationv1.MatchCondition, op admissionregistrationv1.OperationType) {
			pols = append(pols, &admissionregistrationv1.MutatingAdmissionPolicy{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicy"},
				ObjectMeta: o.meta(name),
				Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
					ParamKind: paramKind, MatchConstraints: match(op), Variables: toVariables(vars),
					Mutations:     []admissionregistrationv1.Mutation{m},
					FailurePolicy: &fp, MatchConditions: conds, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				},
			})
			binds = append(binds, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicyBinding"},
				ObjectMeta: o.meta(name),
				Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name, ParamRef: paramRef, MatchResources: bindMatch},
			})
		}
		// CREATE: a JSON patch, which the apiserver applies to the Pod's JSON; an apply
		// configuration would be merged with structured-merge-diff over the whole Pod, which
		// costs the apiserver more (docs/webhooks.md, "Cost").
		mutating(CreatePolicyName(p.Kind), p.createVars, admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
			JSONPatch: &admissionregistrationv1.JSONPatch{Expression: p.create}}, nil, admissionregistrationv1.Create)
		mutating(UpdatePolicyName(p.Kind), p.updateVars, admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: p.update}}, notDeleting, admissionregistrationv1.Update)

		validating := func(name string, vars []variable, checks []validation, action admissionregistrationv1.ValidationAction, ops ...admissionregistrationv1.OperationType) {
			pols = append(pols, &admissionregistrationv1.ValidatingAdmissionPolicy{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
				ObjectMeta: o.meta(name),
				Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
					ParamKind: paramKind, MatchConstraints: match(ops...), Variables: toVariables(vars),
					Validations: toValidations(checks), FailurePolicy: &fp,
				},
			})
			binds = append(binds, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
				ObjectMeta: o.meta(name),
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ParamRef: paramRef,
					MatchResources: bindMatch, ValidationActions: []admissionregistrationv1.ValidationAction{action}},
			})
		}
		validating(CheckPolicyName(p.Kind), p.checkVars, p.checks, admissionregistrationv1.Deny, admissionregistrationv1.Create, admissionregistrationv1.Update)
		if !o.NoWarnings {
			validating(WarnPolicyName(p.Kind), p.warnVars, p.warnings, admissionregistrationv1.Warn, admissionregistrationv1.Create)
		}
	}
	if len(o.ParamsWriters) > 0 {
		p, b := o.paramsGuard()
		pols, binds = append(pols, p), append(binds, b)
	}
	return append(pols, binds...)
}

// WarnObjects are the Warn policies and their bindings, bindings first (what Options.NoWarnings
// leaves out, for deleting them).
func WarnObjects() []client.Object {
	var names []string
	for _, p := range Programs() {
		names = append(names, WarnPolicyName(p.Kind))
	}
	var pols, binds []client.Object
	for _, o := range Objects(Options{}) {
		if !slices.Contains(names, o.GetName()) {
			continue
		}
		if _, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
			binds = append(binds, o)
		} else {
			pols = append(pols, o)
		}
	}
	return append(binds, pols...)
}

// ParamsGuardName names the guard policy and its binding.
const ParamsGuardName = "hyperbatch-admission-params-guard"

// paramsGuard is the ValidatingAdmissionPolicy (and binding) that keeps the param ConfigMaps the
// manager's alone.
func (o Options) paramsGuard() (client.Object, client.Object) {
	writers := make([]string, len(o.ParamsWriters))
	for i, w := range o.ParamsWriters {
		writers[i] = cel(w)
	}
	scope := admissionregistrationv1.NamespacedScope
	fp := admissionregistrationv1.Fail
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: o.meta(ParamsGuardName),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				ResourceNames: []string{ParamsName},
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: &scope}},
			}}},
			FailurePolicy: &fp,
			Validations: []admissionregistrationv1.Validation{{
				Expression: "request.userInfo.username in [" + strings.Join(writers, ", ") + "] || " +
					"(request.operation == 'DELETE' && namespaceObject != null && has(namespaceObject.metadata.deletionTimestamp))",
				Message: fmt.Sprintf("the ConfigMap %s holds the admission params hyperbatch's manager keeps for this namespace's Pods "+
					"(its WorkloadPolicy defaults and allowed queues); only the manager writes it: change the WorkloadPolicy instead", ParamsName),
				Reason: ptrReason(metav1.StatusReasonForbidden),
			}},
		},
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: o.meta(ParamsGuardName),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: ParamsGuardName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	return pol, bind
}

func ptrReason(r metav1.StatusReason) *metav1.StatusReason { return &r }

func (o Options) meta(name string) metav1.ObjectMeta {
	labels := map[string]string{ManagedByLabel: "hyperbatch"}
	for k, v := range o.Labels {
		labels[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: labels}
}

// namespaceSelector is the Pod webhooks' default: namespaces opted in (the namespacelabel
// controller labels every namespace a WorkloadPolicy governs), never an excluded one.
func (o Options) namespaceSelector() *metav1.LabelSelector {
	excluded := []string{metav1.NamespaceSystem}
	for _, n := range o.Excluded {
		if n != "" && !slices.Contains(excluded, n) {
			excluded = append(excluded, n)
		}
	}
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: excluded},
	}}
	if o.NamespaceSelector == nil {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: hbv1.PodWebhookLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{hbv1.PodWebhookLabelEnabled}})
		return sel
	}
	sel.MatchLabels = o.NamespaceSelector.MatchLabels
	sel.MatchExpressions = append(sel.MatchExpressions, o.NamespaceSelector.MatchExpressions...)
	return sel
}

func objectSelector(k defaults.Kind) *metav1.LabelSelector {
	if k == defaults.KindPod {
		return defaults.WorkloadPodSelector()
	}
	return nil
}

func toVariables(vs []variable) []admissionregistrationv1.Variable {
	out := make([]admissionregistrationv1.Variable, len(vs))
	for i, v := range vs {
		out[i] = admissionregistrationv1.Variable{Name: v.name, Expression: v.expression}
	}
	return out
}

func toValidations(vs []validation) []admissionregistrationv1.Validation {
	out := make([]admissionregistrationv1.Validation, len(vs))
	for i, v := range vs {
		out[i] = admissionregistrationv1.Validation{Expression: v.expression, MessageExpression: "string(" + v.message + ")"}
		if v.reason != "" {
			r := metav1.StatusReason(v.reason)
			out[i].Reason = &r
		}
	}
	return out
}

// String describes a Program for logs.
func (p Program) String() string { return fmt.Sprintf("admission policies of %s", p.Kind) }
