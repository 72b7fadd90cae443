package admissionpolicy

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// ParamsName is the name of the param ConfigMap in every governed namespace.
const ParamsName = "hyperbatch-admission"

// ParamsLabel marks the param ConfigMaps (value "true"); the manager watches and lists them by it.
const ParamsLabel = "hyperbatch.dev/admission-params"

// Keys of the param ConfigMap's data. Values the policies read are strings. Fill combination m (a
// sum of the field bits below, 1 to 15) has its defaulted-by value on line m of
// KeyPodDefaultedByList and its warning on line m of KeyPodWarnings: few keys, because every
// ValidatingAdmissionPolicy converts the whole ConfigMap for every request it judges (docs/webhooks.md,
// "Cost").
const (
	KeyPolicy                 = "policy"
	KeyPodQueue               = "pod.queue"
	KeyPodPriorityClassName   = "pod.priorityClassName"
	KeyPodPriority            = "pod.priority"
	KeyPodPreemptionPolicy    = "pod.preemptionPolicy"
	KeyPodPriorityClassDenial = "pod.priorityClassDenial"
	KeyPodSchedulerName       = "pod.schedulerName"
	KeyPodTopologyMode        = "pod.topologyMode"
	KeyPodTopologyTier        = "pod.topologyTier"
	KeyPodTopologySkip        = "pod.topologySkip"
	// KeyPodDefaultedByList are the defaulted-by values of combinations 1 to 15, one a line (an
	// empty line for a combination the namespace never fills).
	KeyPodDefaultedByList = "pod.defaultedByList"
	// KeyPodWarnings are the "defaulted" warnings of combinations 1 to 15, one a line.
	KeyPodWarnings = "pod.warnings"
	// KeyQueueRules are the allowed-queue rules (defaults.QueueRules): rules separated by a blank
	// line, each its refusal message on the first line and its allowed queues on the next ones.
	KeyQueueRules = "queueRules"
)

// Bits of a Pod's fill combination: which fields the engine fills.
const (
	podBitQueue     = 1
	podBitPriority  = 2
	podBitScheduler = 4
	podBitTopology  = 8
	podAllBits      = podBitQueue | podBitPriority | podBitScheduler | podBitTopology
)

// PriorityClassLookup returns a PriorityClass by name, nil when it does not exist.
type PriorityClassLookup func(name string) (*schedulingv1.PriorityClass, error)

// probe values: set on a probe Pod's fields that are not to be filled. Their only job is to be
// set; the engine leaves a set field alone.
const (
	probeQueue     = "probe-queue"
	probeClass     = "probe-class"
	probeScheduler = "probe-scheduler"
	probeNode      = "probe-node"
)

// Params computes the param ConfigMap's data for namespace ns under pols. It runs the engine
// (defaults.Pod) on one probe Pod per combination of unset fields and records what it fills, the
// defaulted-by value it writes and the warning the webhook would give; it never decides a default
// itself.
func Params(ns defaults.Namespace, pols *defaults.Policies, priorityClass PriorityClassLookup) (map[string]string, error) {
	data := map[string]string{}
	if p := pols.MatchNamespace(ns); p != nil {
		data[KeyPolicy] = p.Name
	}
	full := probePod(podAllBits, false)
	res := defaults.Pod(full, ns, pols)
	var note string
	for _, f := range res.Fills {
		switch f.Field {
		case defaults.FieldQueue:
			data[KeyPodQueue] = full.Annotations[defaults.QueueNameAnnotation]
		case defaults.FieldPriorityClassName:
			name := full.Spec.PriorityClassName
			data[KeyPodPriorityClassName] = name
			pc, err := priorityClass(name)
			if err != nil {
				return nil, fmt.Errorf("reading PriorityClass %s: %w", name, err)
			}
			if pc == nil {
				data[KeyPodPriorityClassDenial] = defaults.MissingPriorityClass(name, res.Policy, ns.Name).Error()
				break
			}
			data[KeyPodPriority] = strconv.FormatInt(int64(pc.Value), 10)
			if pc.PreemptionPolicy != nil {
				data[KeyPodPreemptionPolicy] = string(*pc.PreemptionPolicy)
			}
			note = defaults.PriorityNote(name, pc.Value, pc.PreemptionPolicy)
		case defaults.FieldSchedulerName:
			data[KeyPodSchedulerName] = full.Spec.SchedulerName
		case defaults.FieldNetworkTopology:
			if f.Path == annotationPath(defaults.NetworkTopologyModeAnnotation) {
				data[KeyPodTopologyMode] = full.Annotations[defaults.NetworkTopologyModeAnnotation]
			} else {
				data[KeyPodTopologyTier] = full.Annotations[defaults.NetworkTopologyHighestTierAnnotation]
			}
		}
	}
	defaultedBy, warnings := make([]string, podAllBits), make([]string, podAllBits)
	for m := 1; m <= podAllBits; m++ {
		pod := probePod(m, false)
		r := defaults.Pod(pod, ns, pols)
		if fillBits(r) != m {
			continue // the namespace has no default for some field of m: the policies never ask for m
		}
		n := ""
		if m&podBitPriority != 0 {
			n = note
		}
		// One a line: a line break inside a value (none of the engine's has one) would shift the
		// combinations after it.
		defaultedBy[m-1] = oneLine(r.DefaultedBy)
		warnings[m-1] = oneLine(defaults.DefaultedWarning(r.Fills, podValue(pod), n))
	}
	if strings.Join(defaultedBy, "") != "" {
		data[KeyPodDefaultedByList] = strings.Join(defaultedBy, "\n")
		data[KeyPodWarnings] = strings.Join(warnings, "\n")
	}
	if _, ok := data[KeyPodTopologyMode]; ok {
		r := defaults.Pod(probePod(podBitTopology, true), ns, pols)
		for _, s := range r.Skips {
			if s.Field == defaults.FieldNetworkTopology {
				msg := defaults.WarningPrefix + s.String()
				data[KeyPodTopologySkip] = strings.TrimSuffix(msg, s.Conflict)
			}
		}
	}
	var rules []string
	for _, r := range defaults.QueueRules(ns, pols) {
		rules = append(rules, strings.Join(append([]string{r.Message}, r.Allowed...), "\n"))
	}
	if len(rules) > 0 {
		data[KeyQueueRules] = strings.Join(rules, "\n\n")
	}
	return data, nil
}

// oneLine replaces line breaks with spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// ParamsObject is the param ConfigMap of namespace with data.
func ParamsObject(namespace string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ParamsName, Namespace: namespace,
			Labels:      map[string]string{ParamsLabel: "true", "app.kubernetes.io/managed-by": "hyperbatch"},
			Annotations: map[string]string{"hyperbatch.dev/description": "the WorkloadPolicy defaults and allowed queues of this namespace, written by hyperbatch's manager for its admission policies; do not edit"}},
		Data: data,
	}
}

// probePod is a Pod whose fields in bits are unset and whose other defaultable fields are set;
// pinned pins it to a node.
func probePod(bits int, pinned bool) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}
	if bits&podBitQueue == 0 {
		pod.Annotations[defaults.QueueNameAnnotation] = probeQueue
	}
	if bits&podBitPriority == 0 {
		pod.Spec.PriorityClassName = probeClass
	}
	if bits&podBitScheduler == 0 {
		pod.Spec.SchedulerName = probeScheduler
	}
	if bits&podBitTopology == 0 {
		pod.Annotations[defaults.NetworkTopologyModeAnnotation] = string(hbv1.NetworkTopologySoft)
	}
	if pinned {
		pod.Spec.NodeName = probeNode
	}
	return pod
}

// fillBits are the bits of the fields r filled.
func fillBits(r defaults.Result) int {
	bits := 0
	for _, f := range r.Fills {
		switch f.Field {
		case defaults.FieldQueue:
			bits |= podBitQueue
		case defaults.FieldPriorityClassName:
			bits |= podBitPriority
		case defaults.FieldSchedulerName:
			bits |= podBitScheduler
		case defaults.FieldNetworkTopology:
			bits |= podBitTopology
		default:
			return -1
		}
	}
	return bits
}

func annotationPath(key string) string { return "metadata.annotations[" + key + "]" }

// podValue reads a filled field of pod by its Fill path.
func podValue(pod *corev1.Pod) func(string) (string, bool) {
	return func(path string) (string, bool) {
		switch path {
		case "spec.priorityClassName":
			return pod.Spec.PriorityClassName, true
		case "spec.schedulerName":
			return pod.Spec.SchedulerName, true
		}
		if key, ok := strings.CutPrefix(path, "metadata.annotations["); ok {
			v, has := pod.Annotations[strings.TrimSuffix(key, "]")]
			return v, has
		}
		return "", false
	}
}
