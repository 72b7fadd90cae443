package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// WorkloadPolicyCheckName names the ValidatingAdmissionPolicy (and its binding) that checks a
// WorkloadPolicy's namespaceSelector inside kube-apiserver.
const WorkloadPolicyCheckName = "hyperbatch-workloadpolicy-selector"

// The CEL of WorkloadPolicyCheck. A CRD rule cannot hold them: metav1.LabelSelector's lists and map
// have no maxItems, and the CRD's static cost estimate over them exceeds the budget; a
// ValidatingAdmissionPolicy is charged for the selector actually written. An UPDATE that leaves the
// selector as it was is not judged again (as the webhook does), so a policy stored before the check
// can still be edited.
const (
	// qualifiedNameRE is a label key: an optional DNS-subdomain prefix and "/", then a name of at
	// most 63 characters (alphanumerics, '-', '_', '.', alphanumeric at both ends).
	qualifiedNameRE = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	// labelValueRE is a label value: empty, or at most 63 such characters.
	labelValueRE = `^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	operators    = "['In', 'NotIn', 'Exists', 'DoesNotExist']"

	selectorSet    = "has(object.spec) && has(object.spec.namespaceSelector)"
	oldSelectorSet = "has(oldObject.spec) && has(oldObject.spec.namespaceSelector)"
)

// WorkloadPolicyCheck is the ValidatingAdmissionPolicy and binding that refuse a WorkloadPolicy whose
// namespaceSelector could not be applied (what defaults.ValidateNamespaceSelector finds: operators,
// values required or forbidden, label key and value syntax) with no webhook involved, so the check
// holds while hyperbatch's manager is down. The validating webhook keeps the same check (its
// messages name every field); this policy is the one that cannot be bypassed by an outage.
func WorkloadPolicyCheck() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	fp := admissionregistrationv1.Fail
	scope := admissionregistrationv1.ClusterScope
	invalid := metav1.StatusReasonInvalid
	gvr := hbv1.GroupVersion
	const path = "spec.namespaceSelector"
	vars := []admissionregistrationv1.Variable{
		{Name: "exprs", Expression: selectorSet + " && has(object.spec.namespaceSelector.matchExpressions) ? object.spec.namespaceSelector.matchExpressions : []"},
		{Name: "labels", Expression: selectorSet + " && has(object.spec.namespaceSelector.matchLabels) ? object.spec.namespaceSelector.matchLabels : {}"},
		{Name: "unchanged", Expression: "request.operation == 'UPDATE' && (" + selectorSet + ") == (" + oldSelectorSet + ") && " +
			"(!(" + selectorSet + ") || object.spec.namespaceSelector == oldObject.spec.namespaceSelector)"},
	}
	checks := []admissionregistrationv1.Validation{
		{
			Expression: "variables.unchanged || variables.exprs.all(e, e.operator in " + operators + ")",
			MessageExpression: "'" + path + ".matchExpressions: operator \"' + variables.exprs.filter(e, !(e.operator in " + operators + ")).map(e, e.operator).join('\", \"') + " +
				"'\" is not one of In, NotIn, Exists, DoesNotExist (operators are case-sensitive): write one of them'",
		},
		{
			Expression: "variables.unchanged || variables.exprs.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && size(e.values) > 0))",
			MessageExpression: "'" + path + ".matchExpressions: key \"' + variables.exprs.filter(e, e.operator in ['In', 'NotIn'] && (!has(e.values) || size(e.values) == 0)).map(e, e.key).join('\", \"') + " +
				"'\": operators In and NotIn need at least one value: add values or use Exists/DoesNotExist'",
		},
		{
			Expression: "variables.unchanged || variables.exprs.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",
			MessageExpression: "'" + path + ".matchExpressions: key \"' + variables.exprs.filter(e, e.operator in ['Exists', 'DoesNotExist'] && has(e.values) && size(e.values) > 0).map(e, e.key).join('\", \"') + " +
				"'\": operators Exists and DoesNotExist take no values: remove the values or use In/NotIn'",
		},
		{
			Expression: "variables.unchanged || (variables.exprs.all(e, e.key.matches('" + qualifiedNameRE + "') && (!e.key.contains('/') || e.key.split('/')[0].size() <= 253)) && " +
				"variables.labels.all(k, k.matches('" + qualifiedNameRE + "') && (!k.contains('/') || k.split('/')[0].size() <= 253)))",
			Message: path + ": a label key is invalid: it is an optional DNS subdomain prefix (at most 253 characters) and '/', then a name of at most 63 " +
				"characters (letters, digits, '-', '_', '.', starting and ending with a letter or digit), such as 'team' or 'example.com/team'",
		},
		{
			Expression: "variables.unchanged || (variables.labels.all(k, variables.labels[k].matches('" + labelValueRE + "')) && " +
				"variables.exprs.all(e, !has(e.values) || e.values.all(v, v.matches('" + labelValueRE + "'))))",
			Message: path + ": a label value is invalid: it is empty or at most 63 characters (letters, digits, '-', '_', '.', starting and ending " +
				"with a letter or digit), such as 'ml'",
		},
	}
	for i := range checks {
		checks[i].Reason = &invalid
	}
	labels := map[string]string{"app.kubernetes.io/name": "hyperbatch"}
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: WorkloadPolicyCheckName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fp,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{gvr.Group}, APIVersions: []string{gvr.Version},
						Resources: []string{"workloadpolicies"}, Scope: &scope}},
			}}},
			Variables:   vars,
			Validations: checks,
		},
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: WorkloadPolicyCheckName, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: WorkloadPolicyCheckName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	return pol, bind
}
