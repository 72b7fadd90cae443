package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

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
			ok, err := d.podGroupExists(ctx, key)
			if err != nil || ok {
				return err
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

// podGroupExists reads the PodGroup from the cache, then, on a miss, from the apiserver.
func (d *deps) podGroupExists(ctx context.Context, key client.ObjectKey) (bool, error) {
	for _, r := range []reader{d.reader, d.live} {
		if r == nil {
			continue
		}
		var pg schedulingv1beta1.PodGroup
		err := r.Get(ctx, key, &pg)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading PodGroup %s: %w", key, err)
		}
	}
	return false, nil
}
