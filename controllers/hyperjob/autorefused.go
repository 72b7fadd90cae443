package hyperjob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/log"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// A decided auto split that Karmada refuses (docs/multicluster.md, "When a decision changes").
//
// The decision leaves out the members Karmada would not place a child in (memberLeftOut), but the
// Cluster it read may change before Karmada's scheduler looks (a CRD deleted from a member, a taint
// added). When a child's ResourceBinding then ends with Scheduled=False, NoClusterFit, for a reason
// that does not pass by itself (the member does not have the child's API resource, or has a taint
// that is not one of Karmada's own readiness taints) and the member's Cluster shows it, the split
// is reported on the HyperJob (a
// Warning Event AutoSplitRefused) and taken back: the annotation keeps only the refused members,
// as left out, and the next pass decides again without them. That happens once. A second such
// refusal is reported (the AutoSplit condition False, reason AutoSplitRefused) and the HyperJob
// waits: the member must be fixed, or the HyperJob re-created.

// ReasonAutoSplitRefused is the Event and condition reason of a decided split Karmada refused.
const ReasonAutoSplitRefused = "AutoSplitRefused"

// Karmada's scheduler messages for reasons that do not pass by themselves (its APIEnablement and
// TaintToleration filters), and its own taints of a member that is not ready, which do pass.
const (
	karmadaNoAPIResource    = "did not have the API resource"
	karmadaUntoleratedTaint = "had untolerated taint {"
)

var karmadaTransientTaints = []string{"cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable"}

// lastingRefusals maps each member of the decision that Karmada refused a child for a reason that
// does not pass by itself to the child and Karmada's message. bindings are by child name; leftOut
// says why a member is left out now (memberLeftOut of its Cluster, "" when it is not).
//
// A verdict counts only while the binding's placement names the decided member and the member's
// Cluster shows the reason now: Karmada keeps a failed verdict until it schedules the binding
// again (it sets no observed generation on a failure), so after a new decision the old verdict
// stays for a moment under the new placement, and the new member serves the kind.
func lastingRefusals(rec *autoRecord, bindings map[string]*workv1alpha2.ResourceBinding, leftOut func(cluster string) string) map[string]string {
	out := map[string]string{}
	names := make([]string, 0, len(rec.Children))
	for n := range rec.Children {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, child := range names {
		rb := bindings[child]
		cluster := rec.Children[child].Cluster
		if rb == nil || len(rb.Spec.Clusters) > 0 || rb.Spec.Placement == nil || rb.Spec.Placement.ClusterAffinity == nil ||
			!slices.Contains(rb.Spec.Placement.ClusterAffinity.ClusterNames, cluster) || leftOut(cluster) == "" {
			continue
		}
		c := apimeta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		if c == nil || c.Status != "False" || c.Reason != workv1alpha2.BindingReasonNoClusterFit || !lasting(c.Message) {
			continue
		}
		if _, seen := out[cluster]; !seen {
			out[cluster] = fmt.Sprintf("Karmada refused child %s there: %s", child, c.Message)
		}
	}
	return out
}

// lasting reports whether Karmada's NoClusterFit message names a reason that does not pass by
// itself.
func lasting(msg string) bool {
	if strings.Contains(msg, karmadaNoAPIResource) {
		return true
	}
	for rest := msg; ; {
		i := strings.Index(rest, karmadaUntoleratedTaint)
		if i < 0 {
			return false
		}
		rest = rest[i+len(karmadaUntoleratedTaint):]
		transient := false
		for _, k := range karmadaTransientTaints {
			transient = transient || strings.HasPrefix(rest, k)
		}
		if !transient {
			return true
		}
	}
}

// checkAutoRefused looks at a decided split's bindings. When Karmada refused a member of it for a
// lasting reason, the split is taken back once (the annotation rewritten without children, the
// refused members left out) and taken reports true: the HyperJob's watch event brings the pass
// that decides again. After the one retry it sets plan.AutoRefused instead, for the condition.
func (r *Reconciler) checkAutoRefused(ctx context.Context, hj *trainingv1alpha1.HyperJob, plan *Plan) (taken bool, err error) {
	rec := plan.AutoDecided
	if rec == nil || r.auto == nil || !r.gateDispatch {
		return false, nil
	}
	rbs, clusters, err := r.bindingsAndClusters(ctx, hj.Namespace)
	if err != nil {
		return false, err
	}
	now := map[string]string{}
	for i := range clusters.Items {
		now[clusters.Items[i].Name] = memberLeftOut(&clusters.Items[i])
	}
	refused := lastingRefusals(rec, bindingsByChild(rbs.Items), func(c string) string { return now[c] })
	if len(refused) == 0 {
		return false, nil
	}
	msgs := make([]string, 0, len(refused))
	for m, why := range refused {
		msgs = append(msgs, m+": "+why)
	}
	sort.Strings(msgs)
	what := strings.Join(msgs, "; ")
	if rec.Redecided {
		plan.AutoRefused = fmt.Sprintf("the split decided again is refused too (%s); it is decided again only once: make the member serve the child or remove its taint, or re-create the HyperJob", what)
		if c := apimeta.FindStatusCondition(hj.Status.Conditions, ConditionAutoSplit); c == nil || c.Message != plan.AutoRefused {
			r.recorder.Event(hj, corev1.EventTypeWarning, ReasonAutoSplitRefused, plan.AutoRefused)
		}
		return false, nil
	}
	if ok, err := r.cacheIsCurrent(ctx, hj); err != nil || !ok {
		return false, err
	}
	next := &autoRecord{Resource: rec.Resource, Children: map[string]autoPlace{}, LeftOut: maps.Clone(rec.LeftOut), Redecided: true}
	if next.LeftOut == nil {
		next.LeftOut = map[string]string{}
	}
	maps.Copy(next.LeftOut, refused)
	v, err := next.encode()
	if err != nil {
		return false, err
	}
	written, err := r.patchAnnotation(ctx, hj, hbv1.AutoSplitAnnotation, v, "auto split taken back")
	if err != nil || !written {
		return false, err
	}
	log.FromContext(ctx).Info("Karmada refused the decided auto split; deciding again without the refused members", "refused", what)
	r.recorder.Eventf(hj, corev1.EventTypeWarning, ReasonAutoSplitRefused, "%s; deciding the split again without %s (once)", what, strings.Join(sortedKeys(refused), ", "))
	return true, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
