package webhook

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/policyinputs"
)

// TrainJobs (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2.3.0), as unstructured objects: the
// queue goes into a spec.runtimePatches entry of manager hyperbatch.dev/admission (unless an entry or
// the referenced runtime's JobSet template already names one), the policy's deadline into
// spec.activeDeadlineSeconds and its TTL into the hyperbatch.dev/ttl-seconds-after-finished
// annotation. Defaulted on CREATE and carried over on UPDATE.
func (d *deps) trainJobMutator() *mutator[*unstructured.Unstructured] {
	return &mutator[*unstructured.Unstructured]{
		handlerBase: base[unstructured.Unstructured](d, KindTrainJob),
		apply: func(ctx context.Context, tj *unstructured.Unstructured, ns defaults.Namespace, pols *defaults.Policies) (defaults.Result, error) {
			q, err := d.trainingRuntimeQueue(ctx, tj)
			if err != nil {
				return defaults.Result{}, err
			}
			return defaults.TrainJobWithRuntime(tj, q, ns, pols), nil
		},
		refused: d.trainJobValidator().refuses,
	}
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=clustertrainingruntimes;trainingruntimes,verbs=get

// trainingRuntimeQueue is the Volcano queue annotation of the JobSet template of the runtime a
// TrainJob references (policyinputs.TrainingRuntime), read from the apiserver; "" when there is no
// such runtime.
func (d *deps) trainingRuntimeQueue(ctx context.Context, tj *unstructured.Unstructured) (string, error) {
	r := d.live
	if r == nil {
		r = d.reader
	}
	rt, err := policyinputs.TrainingRuntime(ctx, r, tj)
	if err != nil || rt == nil {
		return "", err
	}
	q, _, _ := unstructured.NestedString(rt.Object, "spec", "template", "metadata", "annotations", defaults.QueueNameAnnotation)
	return q, nil
}

// TrainJobs are checked for: the queue of every spec.runtimePatches entry in the policy's
// allowedQueues; the TTL annotation (an integer >= 0, immutable once set); and no
// hyperbatch.dev/active-deadline-seconds annotation (a TrainJob's deadline is its own
// spec.activeDeadlineSeconds, which Trainer enforces).
func (d *deps) trainJobValidator() *validator[*unstructured.Unstructured] {
	return &validator[*unstructured.Unstructured]{
		handlerBase: base[unstructured.Unstructured](d, KindTrainJob),
		check: func(_ context.Context, c *checker, tj, old *unstructured.Unstructured, update bool) error {
			oldQueues := map[string]string{}
			for _, p := range defaults.TrainJobRuntimePatches(old) {
				if q, ok := defaults.TrainJobPatchQueue(p); ok {
					m, _ := p["manager"].(string)
					oldQueues[m] = q
				}
			}
			for i, p := range defaults.TrainJobRuntimePatches(tj) {
				q, ok := defaults.TrainJobPatchQueue(p)
				if !ok || strings.TrimSpace(q) == "" {
					continue
				}
				m, _ := p["manager"].(string)
				was, had := oldQueues[m]
				c.queue(trainJobQueuePath(i), q, update, was, had)
			}
			if v, ok := tj.GetAnnotations()[hbv1.ActiveDeadlineSecondsAnnotation]; ok {
				if _, had := old.GetAnnotations()[hbv1.ActiveDeadlineSecondsAnnotation]; !update || !had {
					c.errs = append(c.errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(hbv1.ActiveDeadlineSecondsAnnotation),
						fmt.Sprintf("a TrainJob's deadline is its own spec.activeDeadlineSeconds, which Trainer enforces: set spec.activeDeadlineSeconds: %s and remove the annotation", v)))
				}
			}
			c.lifecycleAnnotations(withoutDeadlineAnnotation(tj), withoutDeadlineAnnotation(old), update)
			// The sub-group annotations, as far as they can be judged without the JobSet's shape (the
			// podgroup controller judges the rest, with an InvalidGang Event). On UPDATE only when
			// they change, so a TrainJob admitted before is never stuck.
			ann := defaults.TrainJobSubGroupAnnotations(tj.GetAnnotations(), nil)
			if !update || !maps.Equal(ann, defaults.TrainJobSubGroupAnnotations(old.GetAnnotations(), nil)) {
				if _, err := defaults.ParseSubGroupAsk(ann); err != nil {
					c.errs = append(c.errs, field.Invalid(field.NewPath("metadata", "annotations"), subGroupAnnotationsText(ann), err.Error()))
				}
			}
			return nil
		},
	}
}

// trainJobQueuePath is the field path of runtimePatches entry i's queue annotation.
func trainJobQueuePath(i int) *field.Path {
	return field.NewPath("spec", "runtimePatches").Index(i).
		Child("trainingRuntimeSpec", "template", "metadata", "annotations").Key(defaults.QueueNameAnnotation)
}

// withoutDeadlineAnnotation is tj without the active-deadline annotation, which trainJobValidator
// refuses on its own terms.
func withoutDeadlineAnnotation(tj *unstructured.Unstructured) *unstructured.Unstructured {
	a := tj.GetAnnotations()
	if _, ok := a[hbv1.ActiveDeadlineSecondsAnnotation]; !ok {
		return tj
	}
	cp := tj.DeepCopy()
	delete(a, hbv1.ActiveDeadlineSecondsAnnotation)
	cp.SetAnnotations(a)
	return cp
}

// subGroupAnnotationsText is the sub-group annotations as "key=value" pairs in a fixed order.
func subGroupAnnotationsText(ann map[string]string) string {
	var parts []string
	for _, k := range defaults.SubGroupKeys {
		if v, ok := ann[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}
