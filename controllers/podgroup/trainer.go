package podgroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// trainerMakesPodGroup reports whether Kubeflow Trainer makes the PodGroup of a JobSet its TrainJob
// controls: the TrainJob's runtime has spec.podGroupPolicy.volcano. Then hyperbatch makes none of
// its own, even before Trainer's exists (Reconcile is called again when it is created). Both are read
// from the apiserver, and only while the JobSet has no PodGroup.
func (r *Reconciler) trainerMakesPodGroup(ctx context.Context, js *jobsetv1alpha2.JobSet) (bool, error) {
	ref := metav1.GetControllerOfNoCopy(js)
	tj := defaults.NewTrainJob()
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: ref.Name}, tj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading TrainJob %s/%s, the controller of JobSet %s: %w", js.Namespace, ref.Name, js.Name, err)
	}
	if tj.GetUID() != ref.UID {
		return false, nil
	}
	rt, err := policyinputs.TrainingRuntime(ctx, r.reader, tj)
	if err != nil {
		return false, err
	}
	return policyinputs.TrainerMakesPodGroup(rt), nil
}

// priceTrainerPodGroup gives Trainer's PodGroup what Trainer's sum of the templates' requests leaves
// out: the JobSet's pods priced as the apiserver admits them (LimitRange defaults, RuntimeClass
// overhead; MinResources). It writes spec.minResources and the
// hyperbatch.dev/priced-min-resources annotation together, guarded by resourceVersion; the PodGroup
// webhook then keeps minResources at the annotation when Trainer server-side-applies its own sum
// again (it does while the TrainJob is suspended), so the two never fight. minMember, the queue and
// everything else stay Trainer's (and the PodGroup webhook's). A gang whose pods already exist keeps
// its price (keepPrice): those pods were admitted with the old inputs.
func (r *Reconciler) priceTrainerPodGroup(ctx context.Context, js *jobsetv1alpha2.JobSet, pg *schedulingv1beta1.PodGroup) error {
	adm, err := r.admission(ctx, js.Namespace)
	if err != nil {
		return err
	}
	priced, err := MinResources(js, adm)
	if err != nil {
		r.recorder.Event(js, corev1.EventTypeWarning, ReasonInvalidGang, "Trainer's PodGroup not priced: "+err.Error())
		return nil //nolint:nilerr // bad input (the Event names the field and the fix): a retry cannot help
	}
	want := defaults.FormatResourceList(priced)
	if pg.Annotations[hbv1.PricedMinResourcesAnnotation] == want && defaults.SameResourceList(pg.Spec.MinResources, priced) {
		return nil
	}
	if _, had := pg.Annotations[hbv1.PricedMinResourcesAnnotation]; had {
		keep, err := r.keepPrice(ctx, js, pg)
		if err != nil || keep {
			return err
		}
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
