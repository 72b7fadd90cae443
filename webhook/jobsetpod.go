package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// kindJobSetPod is the pods of gang JobSets, admitted by the PodGroup gate: a validating entry
// that comes with KindJobSet (it is not a kind of its own in AllKinds).
const kindJobSetPod Kind = "JobSetPod"

// ValidateJobSetPodPath is the PodGroup gate's path.
const ValidateJobSetPodPath = "/validate-jobset-pod"

// ReasonPodGroupMissing starts the gate's denial message, so the Job controller's FailedCreate
// Event on the Job can be found by it.
const ReasonPodGroupMissing = "PodGroupMissing"

// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch

// jobSetPodGate refuses to create a gang member pod of a JobSet before the JobSet's PodGroup exists.
// On resume (and on creation) the JobSet controller creates the Jobs and the Job controller their
// pods at once; controllers/podgroup applies the PodGroup on the same event, and nothing else
// orders the two. A pod admitted first would be seen by the schedulers without its gang. The Job
// controller treats the refusal as a failed create (a FailedCreate Event on the Job, carrying this
// message) and retries with its back-off (1 s, doubling, at most 60 s), so the first pod is created
// after the PodGroup.
//
// The gate judges only pods that carry the JobSet name label and the group-name annotation the
// JobSet webhook gave the gang (equal to the JobSet's name), of a JobSet that is a gang
// (defaults.JobSetIsGang, the rule controllers/podgroup uses). It reads the PodGroup from the
// cache and, on a miss, from the apiserver (a PodGroup created a moment ago may not be cached yet),
// so it never refuses a pod whose PodGroup exists. Every other pod, and a pod of a JobSet that is
// gone or is not a gang, passes; so does every pod when Options.NoPodGroupGate says that
// controllers/podgroup does not run.
func (d *deps) jobSetPodGate() admission.Handler {
	return &validator[*corev1.Pod]{
		handlerBase: base[corev1.Pod](d, kindJobSetPod),
		check: func(ctx context.Context, c *checker, pod, _ *corev1.Pod, update bool) error {
			if update || d.noPodGroupGate {
				return nil
			}
			name := pod.Labels[jobsetv1alpha2.JobSetNameKey]
			if name == "" || pod.Annotations[defaults.GroupNameAnnotation] != name {
				return nil
			}
			key := client.ObjectKey{Namespace: c.ns.Name, Name: name}
			pg, err := d.podGroupOf(ctx, key)
			if err != nil {
				return err
			}
			if pg != nil {
				return d.subGroupsGate(ctx, c, pg)
			}
			var js jobsetv1alpha2.JobSet
			if err := d.reader.Get(ctx, key, &js); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("reading JobSet %s from the cache: %w", key, err)
			}
			if !js.DeletionTimestamp.IsZero() || !defaults.JobSetIsGang(&js, c.ns, c.pols) {
				return nil
			}
			c.errs = append(c.errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(defaults.GroupNameAnnotation), fmt.Sprintf(
				"%s: PodGroup %s of JobSet %s does not exist yet; hyperbatch's podgroup controller creates it before the gang's pods "+
					"(it is deleted while the JobSet is suspended), and the Job controller retries this pod. If this lasts, check that "+
					"hyperbatch's manager runs the podgroup controller and read the JobSet's Events",
				ReasonPodGroupMissing, key, name)))
			return nil
		},
	}
}

// podGroupOf reads the PodGroup from the cache, then, on a miss, from the apiserver; nil when it
// does not exist.
func (d *deps) podGroupOf(ctx context.Context, key client.ObjectKey) (*schedulingv1beta1.PodGroup, error) {
	for _, r := range []reader{d.reader, d.live} {
		if r == nil {
			continue
		}
		var pg schedulingv1beta1.PodGroup
		err := r.Get(ctx, key, &pg)
		if err == nil {
			return &pg, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading PodGroup %s: %w", key, err)
		}
	}
	return nil, nil
}

// ReasonSubGroupsMissing starts the gate's denial message for a pod of a TrainJob that asks for
// sub-groups while Trainer's PodGroup does not have them yet.
const ReasonSubGroupsMissing = "SubGroupsMissing"

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get

// subGroupsGate refuses a pod of Kubeflow Trainer's PodGroup (podGroupPolicy.volcano) while the
// PodGroup has no subGroupPolicy and its TrainJob asks for sub-groups (hyperbatch.dev/subgroup-by on
// the TrainJob, or on its JobSet from the runtime's template: defaults.TrainJobSubGroupAnnotations):
// Trainer applies the PodGroup without them and controllers/podgroup writes them once the TrainJob's
// JobSet exists, which also starts the pods' creation, so nothing else orders the two. A pod placed
// before would be placed without its sub-group. The TrainJob is read from the apiserver, and only
// for such a PodGroup.
func (d *deps) subGroupsGate(ctx context.Context, c *checker, pg *schedulingv1beta1.PodGroup) error {
	if len(pg.Spec.SubGroupPolicy) > 0 || !defaults.TrainJobOwned(pg) {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(pg)
	r := d.live
	if r == nil {
		r = d.reader
	}
	tj := defaults.NewTrainJob()
	if err := r.Get(ctx, client.ObjectKey{Namespace: pg.Namespace, Name: ref.Name}, tj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading TrainJob %s/%s, the controller of PodGroup %s: %w", pg.Namespace, ref.Name, pg.Name, err)
	}
	if tj.GetUID() != ref.UID || tj.GetDeletionTimestamp() != nil {
		return nil
	}
	var js jobsetv1alpha2.JobSet
	if err := d.reader.Get(ctx, client.ObjectKeyFromObject(pg), &js); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading JobSet %s/%s from the cache: %w", pg.Namespace, pg.Name, err)
	}
	if _, asks := defaults.TrainJobSubGroupAnnotations(tj.GetAnnotations(), js.Annotations)[hbv1.SubGroupByAnnotation]; !asks {
		return nil
	}
	c.errs = append(c.errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(defaults.GroupNameAnnotation), fmt.Sprintf(
		"%s: PodGroup %s/%s of TrainJob %s has no subGroupPolicy yet, which the TrainJob's annotation %s asks for; hyperbatch's podgroup "+
			"controller writes it once the TrainJob's JobSet exists, and the Job controller retries this pod. If this lasts, read the "+
			"TrainJob's Events (InvalidGang names a bad sub-group annotation and the fix)",
		ReasonSubGroupsMissing, pg.Namespace, pg.Name, tj.GetName(), hbv1.SubGroupByAnnotation)))
	return nil
}
