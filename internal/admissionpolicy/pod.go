package admissionpolicy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// The CEL of the Pod policies. Every expression reads the request's fields through optionals
// (?. and orValue), so it never errors on an absent field, and the params through `in` checks, so a
// namespace without a default for a field never gets it. What is default, from where, the
// defaulted-by value and the warnings all come from the params (Params, computed by the engine);
// the expressions here only say which fields are unset, in the engine's sense (internal/defaults,
// package doc), and how a Pod is pinned to nodes (coherence.go): the equivalence test holds them to
// the engine.

// cel quotes s as a CEL string literal.
func cel(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`)
	return "'" + r.Replace(s) + "'"
}

// podPredicates are the variables, over obj ("object" or "oldObject"), that say which fields the
// engine fills; prefix names them (e.g. "new" gives newQueueFill).
func podPredicates(obj, prefix string) []variable {
	ann := prefix + "Ann"
	v := func(name string) string { return "variables." + prefix + name }
	pd := "params.data"
	return []variable{
		{ann, obj + ".metadata.?annotations.orValue({})"},
		{prefix + "Platform", fmt.Sprintf("%s in variables.%s || %s.metadata.?ownerReferences.orValue([]).exists(o, "+
			"(o.?controller.orValue(false) && o.kind == 'DaemonSet' && o.apiVersion.startsWith('apps/')) || (o.kind == 'Node' && o.apiVersion == 'v1'))",
			cel(defaults.MirrorPodAnnotation), ann, obj)},
		{prefix + "Pinned", fmt.Sprintf("%[1]s.spec.?nodeName.orValue('') != '' || "+
			"%[1]s.spec.?nodeSelector.orValue({})[?%[2]s].orValue('') != '' || "+
			"(size(%[1]s.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])) > 0 && "+
			"%[1]s.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).all(t, "+
			"t.?matchFields.orValue([]).exists(f, f.key == 'metadata.name' && f.operator == 'In' && size(f.?values.orValue([])) > 0) || "+
			"t.?matchExpressions.orValue([]).exists(e, e.key == %[2]s && e.operator == 'In' && size(e.?values.orValue([])) > 0)))",
			obj, cel(corev1.LabelHostname))},
		{prefix + "QueueFill", fmt.Sprintf("!%s && %s in %s && variables.%s[?%s].orValue('').trim() == ''",
			v("Platform"), cel(KeyPodQueue), pd, ann, cel(defaults.QueueNameAnnotation))},
		{prefix + "PriorityFill", fmt.Sprintf("!%s && %s in %s && %s.spec.?priorityClassName.orValue('') == ''",
			v("Platform"), cel(KeyPodPriorityClassName), pd, obj)},
		{prefix + "SchedulerFill", fmt.Sprintf("!%s && %s in %s && %s.spec.?schedulerName.orValue('') in ['', %s]",
			v("Platform"), cel(KeyPodSchedulerName), pd, obj, cel(corev1.DefaultSchedulerName))},
		{prefix + "TopologyOpen", fmt.Sprintf("!%s && %s in %s && !(%s in variables.%s) && !(%s in variables.%s)",
			v("Platform"), cel(KeyPodTopologyMode), pd, cel(defaults.NetworkTopologyModeAnnotation), ann, cel(defaults.NetworkTopologyHighestTierAnnotation), ann)},
		{prefix + "TopologyFill", fmt.Sprintf("%s && !%s", v("TopologyOpen"), v("Pinned"))},
		{prefix + "Bits", fmt.Sprintf("(%s ? %d : 0) + (%s ? %d : 0) + (%s ? %d : 0) + (%s ? %d : 0)",
			v("QueueFill"), podBitQueue, v("PriorityFill"), podBitPriority, v("SchedulerFill"), podBitScheduler, v("TopologyFill"), podBitTopology)},
	}
}

// podCreateVariables are the CREATE mutation's variables: the predicates, and newDefaultedBy, the
// defaulted-by value of the fill combination (line newBits of the list).
func podCreateVariables() []variable {
	return append(podPredicates("object", "new"), variable{"newDefaultedBy",
		"variables.newBits == 0 ? '' : params.data[?" + cel(KeyPodDefaultedByList) + "].orValue('').split('\\n')[variables.newBits - 1]"})
}

// podDefaultedByMerge is the defaulted-by value after a fill of combination variables.newBits: the
// request's value with the combination's entries merged in, as the engine merges them (sources in
// first-seen order, each source's fields in the canonical order).
func podDefaultedByMerge() string {
	order := make([]string, 0, len(defaultedByFieldOrder))
	for _, f := range defaultedByFieldOrder {
		order = append(order, cel(f))
	}
	fields := "[" + strings.Join(order, ", ") + "]"
	add := "variables.newDefaultedBy"
	existing := "variables.newAnn[?" + cel(hbv1.DefaultedByAnnotation) + "].orValue('').trim()"
	// ex: the request's entries; nw: the combination's. An existing entry of a source nw also has
	// gets the union of both field lists; nw's other entries follow.
	return fmt.Sprintf("%[1]s == '' ? %[2]s : "+
		"%[1]s.split(';').map(e, e.trim()).filter(e, e != '').map(e, "+
		"%[2]s.split(';').exists(n, n.split('/')[0] == e.split('/')[0].trim()) ? "+
		"e.split('/')[0].trim() + '/' + %[3]s.filter(f, f in "+
		"(size(e.split('/')) > 1 ? e.split('/')[1].split(',').map(x, x.trim()) : []) + "+
		"%[2]s.split(';').filter(n, n.split('/')[0] == e.split('/')[0].trim())[0].split('/')[1].split(',')).join(',') : e)"+
		".join(';') + "+
		"%[2]s.split(';').filter(n, !(n.split('/')[0] in %[1]s.split(';').map(e, e.split('/')[0].trim()))).map(n, ';' + n).join('')",
		existing, add, fields)
}

// defaultedByFieldOrder are the field names a Pod's fills write, in the canonical order
// (defaults.FieldQueue ...); a defaulted-by entry of the request with other names keeps only these
// when it is merged with a fill (docs/webhooks.md, "Admission policies").
var defaultedByFieldOrder = []string{defaults.FieldQueue, defaults.FieldPriorityClassName, defaults.FieldSchedulerName,
	defaults.FieldNetworkTopology, defaults.FieldTTLSecondsAfterFinished, defaults.FieldActiveDeadlineSeconds,
	defaults.FieldClusterNames, defaults.FieldReplicaScheduling, defaults.FieldSpreadConstraints, defaults.FieldPropagateDeps,
	defaults.FieldGroupName}

// podCreatePatch is the CREATE mutation, a JSON patch: the unset fields get the namespace's values
// and the defaulted-by annotation its merged value. An "add" of a member that exists replaces it
// (RFC 6902), as the webhook's patch does; the annotations map is added first when the Pod has none.
func podCreatePatch() string {
	pd := "params.data"
	op := func(cond, path, val string) string {
		return fmt.Sprintf("(%s ? [JSONPatch{op: 'add', path: %s, value: %s}] : [])", cond, cel(path), val)
	}
	ann := func(key string) string { return "/metadata/annotations/" + jsonPointerEscape(key) }
	return strings.Join([]string{
		op("variables.newBits != 0 && !has(object.metadata.annotations)", "/metadata/annotations", "{}"),
		op("variables.newQueueFill", ann(defaults.QueueNameAnnotation), pd+"["+cel(KeyPodQueue)+"]"),
		op("variables.newTopologyFill", ann(defaults.NetworkTopologyModeAnnotation), pd+"["+cel(KeyPodTopologyMode)+"]"),
		op("variables.newTopologyFill && "+cel(KeyPodTopologyTier)+" in "+pd, ann(defaults.NetworkTopologyHighestTierAnnotation), pd+"["+cel(KeyPodTopologyTier)+"]"),
		op("variables.newBits != 0", ann(hbv1.DefaultedByAnnotation), podDefaultedByMerge()),
		op("variables.newPriorityFill", "/spec/priorityClassName", pd+"["+cel(KeyPodPriorityClassName)+"]"),
		op("variables.newPriorityFill && "+cel(KeyPodPriority)+" in "+pd, "/spec/priority", "int("+pd+"["+cel(KeyPodPriority)+"])"),
		op("variables.newPriorityFill && "+cel(KeyPodPreemptionPolicy)+" in "+pd, "/spec/preemptionPolicy", pd+"["+cel(KeyPodPreemptionPolicy)+"]"),
		op("variables.newSchedulerFill", "/spec/schedulerName", pd+"["+cel(KeyPodSchedulerName)+"]"),
	}, " + ")
}

// jsonPointerEscape escapes a JSON pointer reference token (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// podUpdateApply is the UPDATE carry-over (defaults.CarryOverDropped): a field the engine would
// fill in the new object but not in the old one was dropped by the request and gets the old value
// back; a blanked defaulted-by annotation gets its old value back.
func podUpdateApply() string {
	// Every optional entry has the form `cond ? optional.of(value) : optional.none()`: cel-go
	// v0.29's homogeneous-literal validator panics on other optional forms in a literal
	// (kube-apiserver 1.37.2 answers such a policy with an internal error).
	keep := func(now, was, has, get string) string {
		return fmt.Sprintf("%s && !%s && %s ? optional.of(%s) : optional.none()", now, was, has, get)
	}
	oldAnn := func(key string) (has, get string) {
		return cel(key) + " in variables.oldAnn", "variables.oldAnn[" + cel(key) + "]"
	}
	entry := func(key, now, was string) string {
		has, get := oldAnn(key)
		return fmt.Sprintf("?%s: %s", cel(key), keep(now, was, has, get))
	}
	dbHas, dbGet := oldAnn(hbv1.DefaultedByAnnotation)
	return "Object{metadata: Object.metadata{annotations: {" +
		entry(defaults.QueueNameAnnotation, "variables.newQueueFill", "variables.oldQueueFill") + ", " +
		entry(defaults.NetworkTopologyModeAnnotation, "variables.newTopologyFill", "variables.oldTopologyFill") + ", " +
		entry(defaults.NetworkTopologyHighestTierAnnotation, "variables.newTopologyFill && "+cel(KeyPodTopologyTier)+" in params.data", "variables.oldTopologyFill") + ", " +
		fmt.Sprintf("?%s: variables.newAnn[?%s].orValue('').trim() == '' && %s && %s.trim() != '' ? optional.of(%s) : optional.none()",
			cel(hbv1.DefaultedByAnnotation), cel(hbv1.DefaultedByAnnotation), dbHas, dbGet, dbGet) +
		"}}, spec: Object.spec{" +
		fmt.Sprintf("?priorityClassName: %s, ", keep("variables.newPriorityFill", "variables.oldPriorityFill",
			"oldObject.spec.?priorityClassName.orValue('') != ''", "oldObject.spec.priorityClassName")) +
		fmt.Sprintf("?schedulerName: %s", keep("variables.newSchedulerFill", "variables.oldSchedulerFill",
			"oldObject.spec.?schedulerName.orValue('') != ''", "oldObject.spec.schedulerName")) +
		"}}"
}

// Queue checks (the webhook's podValidator and checker.queue): a Pod that names a queue and belongs
// to no PodGroup must name it without surrounding spaces and an allowed one; an unchanged queue is
// not checked again on UPDATE.
func podCheckVariables() []variable {
	qk, gk := cel(defaults.QueueNameAnnotation), cel(defaults.GroupNameAnnotation)
	norm := func(s string) string {
		return fmt.Sprintf("(%[1]s.trim().startsWith(%[2]s) ? %[2]s + %[1]s.trim().substring(%[3]d).trim() : %[1]s.trim())",
			s, cel(defaults.NamespaceQueuePrefix), len(defaults.NamespaceQueuePrefix))
	}
	return []variable{
		{"ann", "object.metadata.?annotations.orValue({})"},
		{"oldAnn", "oldObject != null ? oldObject.metadata.?annotations.orValue({}) : {}"},
		{"update", "request.operation == 'UPDATE'"},
		// A terminating Pod's UPDATE (finalizer removal and the like) always passes, as in the webhook.
		{"deleting", "variables.update && has(object.metadata.deletionTimestamp)"},
		{"q", "variables.ann[?" + qk + "].orValue('')"},
		{"hadQ", "variables.update && " + qk + " in variables.oldAnn"},
		{"oldQ", "variables.oldAnn[?" + qk + "].orValue('')"},
		{"qn", norm("variables.q")},
		{"unchanged", "variables.hadQ && variables.q == variables.oldQ"},
		{"misspelled", "!variables.deleting && !variables.unchanged && variables.qn != '' && variables.qn != variables.q"},
		{"grouped", "variables.ann[?" + gk + "].orValue('').trim() != ''"},
		{"judged", "variables.hadQ && variables.oldAnn[?" + gk + "].orValue('').trim() == ''"},
		{"checkAllowed", "!variables.deleting && !variables.misspelled && variables.qn != '' && !variables.grouped && " +
			"!(variables.judged && (variables.q == variables.oldQ || variables.qn == " + norm("variables.oldQ") + "))"},
		{"refusing", "variables.checkAllowed && " + cel(KeyQueueRules) + " in params.data ? " +
			"params.data[" + cel(KeyQueueRules) + "].split('\\n\\n').map(r, r.split('\\n')).filter(r, !(variables.qn in r)) : []"},
	}
}

func podQueuePath() string {
	return "metadata.annotations[" + defaults.QueueNameAnnotation + "]"
}

// The checks' conditions: each holds when the Pod passes it.
const (
	podCheckSpelling = "!variables.misspelled"
	podCheckAllowed  = "size(variables.refusing) == 0"
)

func podCheckPriorityClass() string {
	return "variables.update || !(" + cel(KeyPodPriorityClassDenial) + " in params.data) || " +
		"object.spec.?priorityClassName.orValue('') != params.data[" + cel(KeyPodPriorityClassName) + "]"
}

// Every message below starts with its own validation's test and is empty when that passes: the
// apiserver evaluates all of a policy's messageExpressions for every request it judges, in a CEL
// activation of their own (the params converted and the variables computed again), whether or not
// a validation failed. Guarded, a message that will not be shown computes no text and raises no
// error (an absent key, an empty list's first element).
func podChecks() []validation {
	return []validation{
		{
			expression: podCheckSpelling,
			message: "!variables.misspelled ? '' : " + cel(podQueuePath()+`: Invalid value: "`) + ` + variables.q + ` +
				cel(fmt.Sprintf(`": a queue name has no spaces around it or after %q: Volcano looks the queue up by its exact name; write "`, defaults.NamespaceQueuePrefix)) +
				` + variables.qn + '"'`,
			reason: "Invalid",
		},
		{
			expression: podCheckAllowed,
			message:    "size(variables.refusing) == 0 ? '' : " + cel(podQueuePath()+`: Forbidden: queue "`) + ` + variables.qn + '"' + variables.refusing[0][0]`,
			// Invalid (422), as the webhook's refusal: its cause is the Forbidden field error.
			reason: "Invalid",
		},
		{
			expression: podCheckPriorityClass(),
			message:    "params.data[?" + cel(KeyPodPriorityClassDenial) + "].orValue('')",
			reason:     "Invalid",
		},
	}
}

// podWarnings are the Warn policy's checks on CREATE: each fails, and so warns, when there is
// something to say. The defaulted warning is found by the defaulted-by value the mutation wrote
// (the stored object says what was filled); the topology skip by the same test the mutation made.
func podWarningVariables() []variable {
	vars := append(podPredicates("object", "new"), podCheckVariables()...)
	return append(vars,
		// refused: the checks policy refuses the Pod. The webhook gives no "defaulted" or skip
		// warning with a refusal (it would read as if the Pod had been created), so neither does
		// this policy.
		variable{"refused", fmt.Sprintf("!(%s) || !(%s) || !(%s)", podCheckSpelling, podCheckAllowed, podCheckPriorityClass())},
		// filled: the fill combination whose defaulted-by value the Pod carries (0: none).
		variable{"filled", "variables.newAnn[?" + cel(hbv1.DefaultedByAnnotation) + "].orValue('') == '' ? 0 : " +
			"params.data[?" + cel(KeyPodDefaultedByList) + "].orValue('').split('\\n').indexOf(variables.newAnn[" + cel(hbv1.DefaultedByAnnotation) + "]) + 1"},
		variable{"pin", "object.spec.?nodeName.orValue('') != '' ? 'spec.nodeName \"' + object.spec.nodeName + '\"' : " +
			"object.spec.?nodeSelector.orValue({})[?" + cel(corev1.LabelHostname) + "].orValue('') != '' ? " +
			cel("spec.nodeSelector["+corev1.LabelHostname+`] "`) + " + object.spec.nodeSelector[" + cel(corev1.LabelHostname) + "] + '\"' : " +
			"'spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (nodes ' + " +
			"object.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).map(t, " +
			"t.?matchFields.orValue([]).exists(f, f.key == 'metadata.name' && f.operator == 'In' && size(f.?values.orValue([])) > 0) ? " +
			"t.matchFields.filter(f, f.key == 'metadata.name' && f.operator == 'In' && size(f.?values.orValue([])) > 0)[0].values.join(', ') : " +
			"t.?matchExpressions.orValue([]).filter(e, e.key == " + cel(corev1.LabelHostname) + " && e.operator == 'In' && size(e.?values.orValue([])) > 0).map(e, e.values.join(', ')).join('')" +
			").join(', ') + ')'"},
	)
}

func podWarnings() []validation {
	return []validation{
		{
			expression: "variables.filled == 0 || variables.refused",
			message:    "variables.filled == 0 ? '' : params.data[" + cel(KeyPodWarnings) + "].split('\\n')[variables.filled - 1]",
		},
		{
			expression: "!(variables.newTopologyOpen && variables.newPinned && " + cel(KeyPodTopologySkip) + " in params.data) || variables.refused",
			message: "!(" + cel(KeyPodTopologySkip) + " in params.data && variables.newTopologyOpen && variables.newPinned) ? '' : " +
				"params.data[" + cel(KeyPodTopologySkip) + "] + variables.pin",
		},
	}
}
