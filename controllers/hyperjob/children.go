package hyperjob

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/naming"
)

// HashLength is the length of the hash label values: SHA-256 in lowercase hex, truncated to the
// longest value a label may hold.
const HashLength = validation.LabelValueMaxLength

// Hash is the SHA-256 of v's canonical JSON (encoding/json: struct fields in declaration order,
// map keys sorted, empty optional fields omitted), hex-encoded and truncated to HashLength so it is
// a valid label value. JSON rather than a Go-struct hash keeps the value stable across library
// versions that only add optional fields.
func Hash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing %T: %w", v, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:HashLength], nil
}

// child is one desired child: a Volcano Job and the PropagationPolicy of the same name.
type child struct {
	name          string
	replicatedJob string
	// template is shared by all children of a replicatedJob; copy it before changing it.
	template     *batchv1alpha1.JobSpec
	templateHash string
	pp           *policyv1alpha1.PropagationPolicy
	ppHash       string
}

// Plan is the desired set of children of a HyperJob.
type Plan struct {
	children []child
	// byReplicatedJob lists child names per replicatedJob, in spec order.
	byReplicatedJob map[string][]string
	// MinAvailable is the number of children that must complete for the HyperJob to complete.
	MinAvailable int32
	// Refusal, when set, says why no children may be created or changed; children is then empty.
	Refusal *Refusal
	// Tenancy, when set, says why no child may be created (a queue or clusters the namespace's
	// WorkloadPolicy does not allow). Unlike Refusal, the plan is complete: the children that exist
	// are kept and counted, so a policy tightened under a running HyperJob stops it from growing,
	// not from finishing.
	Tenancy *Refusal
	// Auto, when set, is the undecided split of a HyperJob in mode auto (autosplit.go): no child
	// exists in the plan until the decision is recorded on the HyperJob.
	Auto *AutoRequest
	// AutoWaiting is why no split fits yet (the decision's numbers), set by the controller when it
	// tried to decide Auto.
	AutoWaiting string
	// AutoDecided is the recorded split of mode auto, for the status (nil without mode auto).
	AutoDecided *autoRecord
	// AutoRefused is why Karmada refused the split decided the second time (autorefused.go), set by
	// the controller.
	AutoRefused string
}

// SplitCount is the number of children the plan asks for.
func (p *Plan) SplitCount() int32 { return int32(len(p.children)) }

// BuildPlan computes a HyperJob's children: names, Volcano Job templates, PropagationPolicies
// (defaulted from the namespace's WorkloadPolicies) and their hashes. It is pure.
func BuildPlan(hj *trainingv1alpha1.HyperJob, ns defaults.Namespace, pols *defaults.Policies) (*Plan, error) {
	p := &Plan{byReplicatedJob: map[string][]string{}}
	refuse := func(r *Refusal) (*Plan, error) { return &Plan{byReplicatedJob: map[string][]string{}, Refusal: r}, nil }

	if errs := validation.IsValidLabelValue(hj.Name); len(errs) > 0 {
		return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidName,
			Message: fmt.Sprintf("the HyperJob name %q cannot be the value of the %s label on its children: %v", hj.Name, hbv1.HyperJobNameLabel, errs)})
	}
	type rjPlan struct {
		rj       *trainingv1alpha1.ReplicatedJob
		split    Split
		hash     string
		clusters []string // candidate clusters after WorkloadPolicy defaults, before maxDomains
	}
	rjs := make([]rjPlan, 0, len(hj.Spec.ReplicatedJobs))
	var total int64
	for i := range hj.Spec.ReplicatedJobs {
		rj := &hj.Spec.ReplicatedJobs[i]
		if errs := validation.IsValidLabelValue(rj.Name); len(errs) > 0 || rj.Name == "" {
			return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidName,
				Message: fmt.Sprintf("replicatedJob name %q cannot be the value of the %s label: %v", rj.Name, hbv1.ReplicatedJobNameLabel, errs)})
		}
		if rj.Replicas < 0 {
			return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidReplicas,
				Message: fmt.Sprintf("replicatedJob %q: replicas %d is negative", rj.Name, rj.Replicas)})
		}
		s, ref := SplitReplicatedJob(rj)
		if ref != nil {
			return refuse(ref)
		}
		n := int64(rj.Replicas) * int64(s.Parts)
		total += n
		// Checked before anything is built per child: the plan's memory is bounded by the limit,
		// whatever the spec asks for.
		if err := naming.CheckChildCount(total, "the sum over spec.replicatedJobs of replicas × children per replica"); err != nil {
			return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonTooManyChildren,
				Message: fmt.Sprintf("replicatedJob %q brings the total to %d: %v", rj.Name, total, err)})
		}
		if n > 0 {
			if err := naming.CheckChildJobNames(hj.Name, rj.Name, int(n)); err != nil {
				return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidName,
					Message: fmt.Sprintf("replicatedJob %q: %v", rj.Name, err)})
			}
		}
		h, err := Hash(&s.Template)
		if err != nil {
			return nil, err
		}
		// The PropagationPolicy shape without the per-child name, defaulted once to learn which
		// clusters the replicatedJob may use.
		probe := desiredPP(hj, rj.Name, "", rj.ClusterNames)
		defaults.PropagationPolicy(probe, ns, pols)
		var clusters []string
		if a := probe.Spec.Placement.ClusterAffinity; a != nil {
			clusters = a.ClusterNames
		}
		rjs = append(rjs, rjPlan{rj: rj, split: s, hash: h, clusters: clusters})
		if p.Tenancy == nil && n > 0 {
			p.Tenancy = tenancyRefusal(hj, rj, &s.Template, ns, pols)
		}
	}

	p.MinAvailable = int32(total)
	if hj.Spec.MinAvailable != nil {
		m := *hj.Spec.MinAvailable
		if m < 1 || int64(m) > total {
			return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidMinAvailable,
				Message: fmt.Sprintf("minAvailable %d must be between 1 and the number of child jobs (%d)", m, total)})
		}
		p.MinAvailable = m
	}

	if p.Tenancy == nil {
		for _, r := range rjs {
			if r.rj.Replicas <= 0 {
				continue
			}
			if ref := defaults.ClusterRefusal(r.clusters, ns, pols); ref != nil {
				p.Tenancy = &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonClusterNotAllowed,
					Message: fmt.Sprintf("replicatedJob %q (spec.replicatedJobs[].clusterNames): %v", r.rj.Name, ref)}
				break
			}
		}
	}

	auto, ref := autoSplitOf(hj, len(rjs), func(i int) (*AutoChild, []string, int32, int32) {
		return rjs[i].split.Auto, rjs[i].clusters, rjs[i].rj.Replicas, rjs[i].split.Parts
	})
	if ref != nil {
		return refuse(ref)
	}
	if auto != nil && auto.decided == nil {
		// Nothing is built until the decision is recorded (autosplit.go).
		p.Auto = auto.request
		return p, nil
	}
	if auto != nil {
		p.AutoDecided = auto.decided
	}

	// maxDomains caps the distinct clusters of the whole HyperJob. Each child's PropagationPolicy keeps
	// its own spread constraint at exactly one cluster (Karmada cannot divide a Volcano Job and would
	// otherwise duplicate it into every cluster of the group), so the cap is applied to the candidate
	// clusters: the first maxDomains distinct names in replicatedJob order.
	if md := hj.Spec.MaxDomains; md != nil && auto == nil {
		if *md < 1 {
			return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidMaxDomains,
				Message: fmt.Sprintf("maxDomains %d must be at least 1", *md)})
		}
		var kept []string
		for _, r := range rjs {
			if total > 0 && r.rj.Replicas > 0 && len(r.clusters) == 0 {
				return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidMaxDomains,
					Message: fmt.Sprintf("maxDomains needs candidate clusters, but replicatedJob %q names none: set its clusterNames or a WorkloadPolicy's propagation.clusterNames", r.rj.Name)})
			}
			for _, c := range r.clusters {
				if len(kept) < int(*md) && !slices.Contains(kept, c) {
					kept = append(kept, c)
				}
			}
		}
		for i := range rjs {
			var in []string
			for _, c := range rjs[i].clusters {
				if slices.Contains(kept, c) {
					in = append(in, c)
				}
			}
			if len(in) == 0 && rjs[i].rj.Replicas > 0 {
				return refuse(&Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidMaxDomains,
					Message: fmt.Sprintf("maxDomains %d keeps clusters %v, none of which replicatedJob %q may use (%v)", *md, kept, rjs[i].rj.Name, rjs[i].clusters)})
			}
			rjs[i].clusters = in
		}
	}

	p.children = make([]child, 0, total)
	for _, r := range rjs {
		n := int(r.rj.Replicas) * int(r.split.Parts)
		names := make([]string, 0, n)
		tmpl := r.split.Template
		for i := 0; i < n; i++ {
			name := naming.ChildJobName(hj.Name, r.rj.Name, i)
			pp := desiredPP(hj, r.rj.Name, name, r.rj.ClusterNames)
			defaults.PropagationPolicy(pp, ns, pols)
			switch {
			case auto != nil:
				// Mode auto: exactly the decided cluster (autosplit.go).
				setClusterNames(pp, []string{auto.decided.Children[name].Cluster})
			case hj.Spec.MaxDomains != nil:
				setClusterNames(pp, r.clusters)
			}
			ppHash, err := Hash(&pp.Spec)
			if err != nil {
				return nil, err
			}
			pp.Labels[hbv1.PPSpecHashLabel] = ppHash
			p.children = append(p.children, child{name: name, replicatedJob: r.rj.Name, template: &tmpl,
				templateHash: r.hash, pp: pp, ppHash: ppHash})
			names = append(names, name)
		}
		p.byReplicatedJob[r.rj.Name] = names
	}
	return p, nil
}

// tenancyRefusal checks the queue a replicatedJob's children get (its template's, else the
// defaults') against the namespace's WorkloadPolicies: the same check the webhook makes, so a
// namespace the webhooks skip gets no child in a queue its policy does not allow.
func tenancyRefusal(hj *trainingv1alpha1.HyperJob, rj *trainingv1alpha1.ReplicatedJob, tmpl *batchv1alpha1.JobSpec, ns defaults.Namespace, pols *defaults.Policies) *Refusal {
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: hj.Namespace}, Spec: batchv1alpha1.JobSpec{Queue: tmpl.Queue}}
	defaults.HyperJobChild(probe, ns, pols)
	if ref := defaults.QueueRefusal(probe.Spec.Queue, ns, pols); ref != nil {
		return &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonQueueNotAllowed,
			Message: fmt.Sprintf("replicatedJob %q (spec.replicatedJobs[].templateSpec.queue): %v", rj.Name, ref)}
	}
	return nil
}

func setClusterNames(pp *policyv1alpha1.PropagationPolicy, names []string) {
	pl := &pp.Spec.Placement
	if pl.ClusterAffinity == nil {
		pl.ClusterAffinity = &policyv1alpha1.ClusterAffinity{}
	}
	pl.ClusterAffinity.ClusterNames = slices.Clone(names)
}

// childLabels are the labels both kinds of child carry (docs/design.md, "Keys").
func childLabels(hj *trainingv1alpha1.HyperJob, rj string) map[string]string {
	return map[string]string{hbv1.HyperJobNameLabel: hj.Name, hbv1.ReplicatedJobNameLabel: rj}
}

func controllerRef(hj *trainingv1alpha1.HyperJob) metav1.OwnerReference {
	return *metav1.NewControllerRef(hj, trainingv1alpha1.SchemeGroupVersion.WithKind("HyperJob"))
}

// desiredPP is a child's PropagationPolicy before WorkloadPolicy defaults: it selects exactly the
// child's Volcano Job, propagates its dependencies, keeps the whole job in one cluster (Divided +
// Aggregated, spread by cluster min 1 / max 1) and prefers the replicatedJob's clusters.
func desiredPP(hj *trainingv1alpha1.HyperJob, rj, name string, clusters []string) *policyv1alpha1.PropagationPolicy {
	pp := &policyv1alpha1.PropagationPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: policyv1alpha1.SchemeGroupVersion.String(), Kind: "PropagationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hj.Namespace, Labels: childLabels(hj, rj),
			OwnerReferences: []metav1.OwnerReference{controllerRef(hj)}},
		Spec: policyv1alpha1.PropagationSpec{
			PropagateDeps: true,
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{
				APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job", Name: name,
			}},
			Placement: policyv1alpha1.Placement{
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
				},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{
					SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1,
				}},
			},
		},
	}
	if len(clusters) > 0 {
		pp.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: slices.Clone(clusters)}
	}
	return pp
}

// desiredJob is a child Volcano Job: the replicatedJob's (split) template, then WorkloadPolicy
// defaults for whatever the template leaves open, without ttlSecondsAfterFinished, and with the
// finalizer that keeps it until its final state is recorded (finalizer.go). The template hash is
// taken before the defaults (and before the TTL is dropped), so a WorkloadPolicy change never
// recreates running children.
func desiredJob(hj *trainingv1alpha1.HyperJob, c *child, ns defaults.Namespace, pols *defaults.Policies) *batchv1alpha1.Job {
	labels := childLabels(hj, c.replicatedJob)
	labels[hbv1.VCJobTemplateSpecHashLabel] = c.templateHash
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: hj.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef(hj)},
			Finalizers:      []string{hbv1.HyperJobChildFinalizer}},
		Spec: *c.template.DeepCopy(),
	}
	defaults.HyperJobChild(job, ns, pols)
	// A child has no TTL of its own, neither the template's nor a WorkloadPolicy's: the HyperJob's
	// lifecycle governs its children (they go with it), and a child deleted by its own TTL would
	// leave the HyperJob to tell from its status alone whether it ever finished.
	job.Spec.TTLSecondsAfterFinished = nil
	return job
}
