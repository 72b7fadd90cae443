package defaults

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Warnings are shown by kubectl as "Warning: ..."; the apiserver truncates a response's warnings
// beyond 4096 runes in total, so ours stay well below.
const (
	maxWarningRunes = 1500
	maxValueRunes   = 120
	// WarningPrefix starts every hyperbatch admission warning.
	WarningPrefix = "hyperbatch: "
)

// DefaultedWarning is the admission warning for what a call filled, e.g. "hyperbatch: defaulted
// spec.queue=team-a, spec.priorityClassName=batch-normal from WorkloadPolicy team-a". Fields are
// grouped by source in the order they were filled; value returns a filled field's value in the
// defaulted object ("?" is shown when it has none). note, when set, ends the warning. The webhook
// and the admission policies' parameters (internal/admissionpolicy) both write it with this.
func DefaultedWarning(fills []Fill, value func(path string) (string, bool), note string) string {
	type group struct {
		source string
		items  []string
	}
	var groups []group
	for _, f := range fills {
		src := f.Describe()
		i := slices.IndexFunc(groups, func(g group) bool { return g.source == src })
		if i < 0 {
			groups = append(groups, group{source: src})
			i = len(groups) - 1
		}
		v, ok := value(f.Path)
		if !ok {
			v = "?"
		} else if utf8.RuneCountInString(v) > maxValueRunes {
			v = string([]rune(v)[:maxValueRunes]) + "…"
		}
		groups[i].items = append(groups[i].items, f.Path+"="+v)
	}
	var b strings.Builder
	b.Grow(256)
	b.WriteString(WarningPrefix + "defaulted ")
	for i, g := range groups {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, item := range g.items {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(item)
		}
		b.WriteString(" from " + g.source)
	}
	if note != "" {
		if len(groups) > 0 {
			b.WriteString("; ")
		}
		b.WriteString(note)
	}
	return ClipWarning(b.String())
}

// ClipWarning shortens a warning to the length hyperbatch's warnings keep to, pointing at the
// defaulted-by annotation for the rest.
func ClipWarning(s string) string {
	if utf8.RuneCountInString(s) <= maxWarningRunes {
		return s
	}
	return string([]rune(s)[:maxWarningRunes]) + "… (see the " + hbv1.DefaultedByAnnotation + " annotation)"
}

// PriorityNote is the end of a Pod's warning when its priorityClassName was filled: the priority
// (and preemption policy) taken from the PriorityClass, as the Priority admission plugin would.
func PriorityNote(class string, value int32, preemption *corev1.PreemptionPolicy) string {
	note := "spec.priority=" + strconv.FormatInt(int64(value), 10)
	if preemption != nil {
		note += ", spec.preemptionPolicy=" + string(*preemption)
	}
	return note + " from PriorityClass " + class
}

// MissingPriorityClass is the refusal of a Pod whose filled spec.priorityClassName names a
// PriorityClass that does not exist: it names the policy and the fixes, where the Priority admission
// plugin would later say only "not found".
func MissingPriorityClass(class, policy, namespace string) *field.Error {
	return field.Invalid(field.NewPath("spec", "priorityClassName"), class,
		fmt.Sprintf("PriorityClass %q does not exist; it is the default priorityClassName of WorkloadPolicy %q, which governs namespace %q: "+
			"create the PriorityClass, correct the policy's spec.defaults.priorityClassName, or set spec.priorityClassName on the Pod",
			class, policy, namespace))
}
