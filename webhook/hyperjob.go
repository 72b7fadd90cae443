package webhook

import (
	"context"
	"slices"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/naming"
)

// HyperJobs (training.volcano.sh/v1alpha1): every replicatedJob's templateSpec gets queue (the CRD's
// "default" counts as unset), priorityClassName, schedulerName and networkTopology; the HyperJob gets
// the ttl-seconds-after-finished and active-deadline-seconds annotations. Defaulted on CREATE and
// carried over on UPDATE; a replicatedJob added by an UPDATE is not defaulted (it would change a
// running HyperJob), so it needs an allowed queue of its own.
func (d *deps) hyperJobMutator() *mutator[*trainingv1alpha1.HyperJob] {
	return &mutator[*trainingv1alpha1.HyperJob]{
		handlerBase: base[trainingv1alpha1.HyperJob](d, KindHyperJob),
		apply:       engineOf[*trainingv1alpha1.HyperJob](KindHyperJob),
		refused:     d.hyperJobValidator().refuses,
	}
}

// HyperJobs are checked for: every templateSpec.queue in the policy's allowedQueues; the lifecycle
// annotations; and their shape: replicatedJob names are unique DNS-1035 labels, replicas >= 1, and
// the generated child names {hyperjob}-{replicatedjob}-{index} fit in 63 characters. On UPDATE the
// shape of replicatedJobs that did not change is not judged again.
func (d *deps) hyperJobValidator() *validator[*trainingv1alpha1.HyperJob] {
	return &validator[*trainingv1alpha1.HyperJob]{
		handlerBase: base[trainingv1alpha1.HyperJob](d, KindHyperJob),
		check: func(_ context.Context, c *checker, hj, old *trainingv1alpha1.HyperJob, update bool) error {
			oldByName := map[string]*trainingv1alpha1.ReplicatedJob{}
			for i := range old.Spec.ReplicatedJobs {
				oldByName[old.Spec.ReplicatedJobs[i].Name] = &old.Spec.ReplicatedJobs[i]
			}
			rjs := field.NewPath("spec", "replicatedJobs")
			seen := map[string]bool{}
			for i := range hj.Spec.ReplicatedJobs {
				rj := &hj.Spec.ReplicatedJobs[i]
				p := rjs.Index(i)
				prev, existed := oldByName[rj.Name]
				var oldQueue string
				if existed {
					oldQueue = prev.TemplateSpec.Queue
				}
				c.queue(p.Child("templateSpec", "queue"), rj.TemplateSpec.Queue, update, oldQueue, existed)
				if !update || !existed || !slices.Equal(prev.ClusterNames, rj.ClusterNames) {
					c.clusters(p.Child("clusterNames"), rj.ClusterNames)
				}

				if seen[rj.Name] {
					c.errs = append(c.errs, field.Duplicate(p.Child("name"), rj.Name))
					continue
				}
				seen[rj.Name] = true
				if update && existed && prev.Replicas == rj.Replicas && old.Name == hj.Name {
					continue
				}
				c.replicatedJobShape(hj.Name, p, rj)
			}
			c.childCount(hj, old, update)
			c.lifecycleAnnotations(hj, old, update)
			return nil
		},
	}
}

// childCount refuses a HyperJob whose replicas add up to more than naming.MaxChildren children (the
// controller checks the count again with split policies, which make several children per replica).
// On UPDATE only a count that grows is judged, so a HyperJob admitted before the limit was lowered
// can still be scaled down or have its finalizers removed.
func (c *checker) childCount(hj, old *trainingv1alpha1.HyperJob, update bool) {
	sum := func(h *trainingv1alpha1.HyperJob) int64 {
		var n int64
		for i := range h.Spec.ReplicatedJobs {
			n += int64(max(h.Spec.ReplicatedJobs[i].Replicas, 0))
		}
		return n
	}
	total := sum(hj)
	if update && total <= sum(old) {
		return
	}
	if err := naming.CheckChildCount(total, "the sum of spec.replicatedJobs[*].replicas"); err != nil {
		c.errs = append(c.errs, field.Invalid(field.NewPath("spec", "replicatedJobs").Key("*").Child("replicas"), total, err.Error()))
	}
}

// clusters checks a replicatedJob's clusterNames against allowedClusters. Without clusterNames the
// controller gives its children the policy's default propagation.clusterNames (the same engine
// call), which is what is checked then.
func (c *checker) clusters(p *field.Path, names []string) {
	probe := &policyv1alpha1.PropagationPolicy{}
	if len(names) > 0 {
		probe.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: names}
	}
	defaults.PropagationPolicy(probe, c.ns, c.pols)
	var effective []string
	if a := probe.Spec.Placement.ClusterAffinity; a != nil {
		effective = a.ClusterNames
	}
	if ref := defaults.ClusterRefusal(effective, c.ns, c.pols); ref != nil {
		c.errs = append(c.errs, field.Forbidden(p, ref.Error()))
	}
}

func (c *checker) replicatedJobShape(hyperJob string, p *field.Path, rj *trainingv1alpha1.ReplicatedJob) {
	nameOK := true
	for _, msg := range validation.IsDNS1035Label(rj.Name) {
		c.errs = append(c.errs, field.Invalid(p.Child("name"), rj.Name, msg))
		nameOK = false
	}
	if rj.Replicas < 1 {
		c.errs = append(c.errs, field.Invalid(p.Child("replicas"), rj.Replicas, "must be greater than or equal to 1"))
		return
	}
	if !nameOK || hyperJob == "" {
		return
	}
	if err := naming.CheckChildJobNames(hyperJob, rj.Name, int(rj.Replicas)); err != nil {
		c.errs = append(c.errs, field.Invalid(p.Child("name"), rj.Name, err.Error()))
	}
}
