package podgroup

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/policyinputs"
)

// ReasonPodGroupPriced is the Event reason when Trainer's PodGroup of a TrainJob gets the
// minResources its pods will be admitted with.
const ReasonPodGroupPriced = "PodGroupPriced"

// trainerPodGroup reports whether pg is the PodGroup Kubeflow Trainer made (podGroupPolicy.volcano)
// for the TrainJob that also controls js.
func trainerPodGroup(js *jobsetv1alpha2.JobSet, pg *schedulingv1beta1.PodGroup) bool {
	if !defaults.TrainJobOwned(js) || !defaults.TrainJobOwned(pg) {
		return false
	}
	return metav1.GetControllerOfNoCopy(js).UID == metav1.GetControllerOfNoCopy(pg).UID
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=clustertrainingruntimes;trainingruntimes,verbs=get

// trainJobOf reads the TrainJob that controls js from the apiserver; nil when it is gone or is
// another TrainJob of the same name.
func (r *Reconciler) trainJobOf(ctx context.Context, js *jobsetv1alpha2.JobSet) (*unstructured.Unstructured, error) {
	ref := metav1.GetControllerOfNoCopy(js)
	tj := defaults.NewTrainJob()
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: ref.Name}, tj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading TrainJob %s/%s, the controller of JobSet %s: %w", js.Namespace, ref.Name, js.Name, err)
	}
	if tj.GetUID() != ref.UID {
		return nil, nil
	}
	return tj, nil
}

// trainerMakesPodGroup reports whether Kubeflow Trainer makes the PodGroup of a JobSet the TrainJob
// tj controls: the TrainJob's runtime has spec.podGroupPolicy.volcano. Then hyperbatch makes none of
// its own, even before Trainer's exists (Reconcile is called again when it is created). The runtime
// is read from the apiserver, only while the JobSet has no PodGroup.
func (r *Reconciler) trainerMakesPodGroup(ctx context.Context, tj *unstructured.Unstructured) (bool, error) {
	rt, err := policyinputs.TrainingRuntime(ctx, r.reader, tj)
	if err != nil {
		return false, err
	}
	return policyinputs.TrainerMakesPodGroup(rt), nil
}

// withSubGroupAnnotations is js with the sub-group annotations that hold for it as the JobSet of
// TrainJob tj (defaults.TrainJobSubGroupAnnotations) in place of its own; js is not changed.
func withSubGroupAnnotations(js *jobsetv1alpha2.JobSet, tj *unstructured.Unstructured) *jobsetv1alpha2.JobSet {
	cp := *js
	cp.Annotations = map[string]string{}
	for k, v := range js.Annotations {
		cp.Annotations[k] = v
	}
	for _, k := range defaults.SubGroupKeys {
		delete(cp.Annotations, k)
	}
	for k, v := range defaults.TrainJobSubGroupAnnotations(tj.GetAnnotations(), js.Annotations) {
		cp.Annotations[k] = v
	}
	return &cp
}

// trainJobSubGroups is the subGroupPolicy the JobSet of TrainJob tj gets: the TrainJob's
// hyperbatch.dev/subgroup-* annotations (else the JobSet's own) over the JobSet's replicatedJobs. A
// node of a TrainJob is one pod of the trainer's replicatedJob and its rank is the pod's completion
// index, so subgroup-by: pods with subgroup-pods N makes each N ranks, in rank order, a sub-group.
// An error names the TrainJob, the annotation and the fix.
func trainJobSubGroups(js *jobsetv1alpha2.JobSet, tj *unstructured.Unstructured) ([]schedulingv1beta1.SubGroupPolicySpec, error) {
	sg, err := SubGroupsFor(js, defaults.TrainJobSubGroupAnnotations(tj.GetAnnotations(), js.Annotations))
	if err != nil && defaults.AsksForSubGroups(tj.GetAnnotations()) {
		return nil, fmt.Errorf("TrainJob %s: %w", tj.GetName(), err)
	}
	return sg, err
}

// invalidTrainJobGang sends the InvalidGang Warning to the JobSet and to its TrainJob, where the user
// of a TrainJob looks.
func (r *Reconciler) invalidTrainJobGang(js *jobsetv1alpha2.JobSet, tj *unstructured.Unstructured, msg string) {
	r.recorder.Event(js, corev1.EventTypeWarning, ReasonInvalidGang, msg)
	r.recorder.Event(tj, corev1.EventTypeWarning, ReasonInvalidGang, msg)
}

// ReasonSubGroupsWritten is the Event reason when Trainer's PodGroup of a TrainJob gets the
// sub-groups the TrainJob asks for.
const ReasonSubGroupsWritten = "SubGroupsWritten"

// subGroupTrainerPodGroup writes into Trainer's PodGroup the sub-groups its TrainJob asks for
// (trainJobSubGroups), by a merge patch guarded by resourceVersion with this controller's field
// owner. Trainer's server-side apply (field manager trainer, forced) never names
// spec.subGroupPolicy, so it neither removes nor takes over the field: the two never fight. The
// PodGroup gate refuses the TrainJob's pods while the PodGroup lacks them, so no pod is placed
// without its sub-group. A PodGroup that already has sub-groups keeps them while any of the gang's
// pods is active (gangStarted, whatever the PodGroup's phase says): they were placed by those. A
// TrainJob that asks for none leaves the PodGroup as it is.
func (r *Reconciler) subGroupTrainerPodGroup(ctx context.Context, js *jobsetv1alpha2.JobSet, tj *unstructured.Unstructured, pg *schedulingv1beta1.PodGroup) error {
	if tj == nil {
		return nil
	}
	want, err := trainJobSubGroups(js, tj)
	if err != nil {
		r.invalidTrainJobGang(js, tj, "Trainer's PodGroup gets no sub-groups: "+err.Error())
		return nil //nolint:nilerr // bad input (the Events name the annotation and the fix): a retry cannot help
	}
	if len(want) == 0 || equality.Semantic.DeepEqual(want, pg.Spec.SubGroupPolicy) {
		return nil
	}
	if len(pg.Spec.SubGroupPolicy) > 0 {
		started, err := r.gangStarted(ctx, js)
		if err != nil || started {
			return err
		}
	}
	orig := pg.DeepCopy()
	pg.Spec.SubGroupPolicy = want
	err = r.client.Patch(ctx, pg, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldOwner))
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil // the watch event of the newer PodGroup brings the next pass
	case err != nil:
		writes.WithLabelValues("subgroups", "error").Inc()
		return fmt.Errorf("writing the sub-groups of Trainer's PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	writes.WithLabelValues("subgroups", "ok").Inc()
	names := make([]string, 0, len(want))
	for _, p := range want {
		names = append(names, fmt.Sprintf("%s (%d pods)", p.Name, ptr.Deref(p.SubGroupSize, 1)))
	}
	msg := fmt.Sprintf("Trainer's PodGroup %s: subGroupPolicy %s, from TrainJob %s's annotations", pg.Name, strings.Join(names, ", "), tj.GetName())
	r.recorder.Event(js, corev1.EventTypeNormal, ReasonSubGroupsWritten, msg)
	r.recorder.Event(tj, corev1.EventTypeNormal, ReasonSubGroupsWritten, msg)
	log.FromContext(ctx).V(1).Info("wrote the sub-groups of Trainer's PodGroup", "podgroup", client.ObjectKeyFromObject(pg), "policies", len(want))
	return nil
}

// priceTrainerPodGroup gives Trainer's PodGroup what Trainer's sum of the templates' requests leaves
// out: the JobSet's pods priced as the apiserver admits them (LimitRange defaults, RuntimeClass
// overhead; MinResources). It writes spec.minResources and the
// hyperbatch.dev/priced-min-resources annotation together, guarded by resourceVersion; the PodGroup
// webhook then keeps minResources at the annotation when Trainer server-side-applies its own sum
// again (it does while the TrainJob is suspended), so the two never fight. minMember, the queue and
// everything else stay Trainer's (and the PodGroup webhook's). The price follows the gang's pods
// that exist (PriceFollowingPods), as for hyperbatch's own gangs: a pod admitted with other inputs
// keeps its requests, and a suspended TrainJob (no pod) is priced from the current inputs whatever
// phase the PodGroup kept from before the suspend (Trainer keeps it, and nothing moves the phase of
// a PodGroup with no pod). A finished TrainJob's priced PodGroup is left as it is.
func (r *Reconciler) priceTrainerPodGroup(ctx context.Context, js *jobsetv1alpha2.JobSet, pg *schedulingv1beta1.PodGroup) error {
	if _, had := pg.Annotations[hbv1.PricedMinResourcesAnnotation]; had && Finished(js) {
		return nil
	}
	adm, err := r.admission(ctx, js.Namespace)
	if err != nil {
		return err
	}
	if _, err := MinResources(js, adm); err != nil {
		r.recorder.Event(js, corev1.EventTypeWarning, ReasonInvalidGang, "Trainer's PodGroup not priced: "+err.Error())
		return nil //nolint:nilerr // bad input (the Event names the field and the fix): a retry cannot help
	}
	price, err := r.followPods(ctx, js, adm)
	if err != nil {
		return err
	}
	if price.FollowsOldInputs() {
		r.reportKept(js, pg.Name, pg, price)
	}
	priced := price.MinResources
	want := defaults.FormatResourceList(priced)
	if pg.Annotations[hbv1.PricedMinResourcesAnnotation] == want && defaults.SameResourceList(pg.Spec.MinResources, priced) {
		return nil
	}
	orig := pg.DeepCopy()
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	pg.Annotations[hbv1.PricedMinResourcesAnnotation] = want
	pg.Spec.MinResources = &priced
	err = r.client.Patch(ctx, pg, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldOwner))
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil // the watch event of the newer PodGroup brings the next pass
	case err != nil:
		writes.WithLabelValues("price", "error").Inc()
		return fmt.Errorf("pricing Trainer's PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	writes.WithLabelValues("price", "ok").Inc()
	r.recorder.Eventf(js, corev1.EventTypeNormal, ReasonPodGroupPriced,
		"Trainer's PodGroup %s: minResources %s (was %s: Trainer sums the templates' requests without LimitRange defaults or RuntimeClass overhead)",
		pg.Name, want, formatResources(orig.Spec.MinResources))
	log.FromContext(ctx).V(1).Info("priced Trainer's PodGroup", "podgroup", client.ObjectKeyFromObject(pg), "minResources", want)
	return nil
}
