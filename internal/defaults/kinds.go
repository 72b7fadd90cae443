package defaults

import (
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// The kind table: every kind hyperbatch admits, with what the webhook, its configurations and the
// tools that explain defaults need to know about it. Adding a kind is a row here (docs/design.md,
// "Adding a kind", lists the other steps).

// Kind names one kind of object hyperbatch admits.
type Kind string

// The kinds hyperbatch admits.
const (
	KindPod               Kind = "Pod"
	KindVolcanoJob        Kind = "VolcanoJob"
	KindPodGroup          Kind = "PodGroup"
	KindJobSet            Kind = "JobSet"
	KindHyperJob          Kind = "HyperJob"
	KindTrainJob          Kind = "TrainJob"
	KindPropagationPolicy Kind = "PropagationPolicy"
	KindWorkloadPolicy    Kind = "WorkloadPolicy"
)

// Stable paths of the webhook server's handlers. The webhook configurations refer to them, so they
// never change.
const (
	MutatePodPath                 = "/mutate-pod"
	MutateVolcanoJobPath          = "/mutate-volcano-job"
	MutatePodGroupPath            = "/mutate-podgroup"
	MutateJobSetPath              = "/mutate-jobset"
	MutateHyperJobPath            = "/mutate-hyperjob"
	MutateTrainJobPath            = "/mutate-trainjob"
	MutatePropagationPolicyPath   = "/mutate-propagationpolicy"
	ValidatePodPath               = "/validate-pod"
	ValidateVolcanoJobPath        = "/validate-volcano-job"
	ValidatePodGroupPath          = "/validate-podgroup"
	ValidateJobSetPath            = "/validate-jobset"
	ValidateHyperJobPath          = "/validate-hyperjob"
	ValidateTrainJobPath          = "/validate-trainjob"
	ValidatePropagationPolicyPath = "/validate-propagationpolicy"
	ValidateWorkloadPolicyPath    = "/validate-workloadpolicy"
)

// CarryOver is the rule a kind's UPDATE follows in the mutating webhook.
type CarryOver string

const (
	// CarryOverNone is for a kind without defaults: an UPDATE is never patched.
	CarryOverNone CarryOver = "None"
	// CarryOverDropped means an UPDATE introduces nothing; it only gets back the defaults the request
	// dropped (a field the engine would fill in the new object that the old object had set keeps its
	// old value), and the defaulted-by annotation when the request blanked it. A changed policy
	// never rewrites a running workload.
	CarryOverDropped CarryOver = "Dropped"
)

// Object is what a kind's engine function takes: a Kubernetes object (every client.Object is one).
type Object interface {
	metav1.Object
	runtime.Object
}

// KindSpec is one row of the kind table.
type KindSpec struct {
	Kind Kind
	// GVK is the admitted version; Resource its plural resource name.
	GVK      schema.GroupVersionKind
	Resource string
	// ClusterScoped: the kind has no namespace.
	ClusterScoped bool
	// MutatePath and ValidatePath are the webhook server's paths; "" when the kind has no webhook
	// of that direction.
	MutatePath, ValidatePath string
	// New returns an empty object of the kind.
	New func() Object
	// Default is the engine function the mutating webhook calls on CREATE (the same function the
	// request's object would get from a kubectl plugin that explains defaults): it fills obj in place
	// and reports what it filled. nil when the kind has no defaults. An obj of another type than
	// New's is left unchanged.
	Default func(obj Object, ns Namespace, pols *Policies) Result
	// CarryOver is the UPDATE rule.
	CarryOver CarryOver
}

// engine adapts a typed kind function to KindSpec.Default.
func engine[T Object](f func(T, Namespace, *Policies) Result) func(Object, Namespace, *Policies) Result {
	return func(obj Object, ns Namespace, pols *Policies) Result {
		t, ok := obj.(T)
		if !ok {
			return Result{}
		}
		return f(t, ns, pols)
	}
}

// kindTable is in the order the webhook configurations list the kinds.
var kindTable = []KindSpec{
	{Kind: KindPod, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: "pods",
		MutatePath: MutatePodPath, ValidatePath: ValidatePodPath,
		New: func() Object { return &corev1.Pod{} }, Default: engine(Pod), CarryOver: CarryOverDropped},
	{Kind: KindVolcanoJob, GVK: batchv1alpha1.SchemeGroupVersion.WithKind("Job"), Resource: "jobs",
		MutatePath: MutateVolcanoJobPath, ValidatePath: ValidateVolcanoJobPath,
		New: func() Object { return &batchv1alpha1.Job{} }, Default: engine(VolcanoJobAsSubmitted), CarryOver: CarryOverDropped},
	{Kind: KindPodGroup, GVK: schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup"), Resource: "podgroups",
		MutatePath: MutatePodGroupPath, ValidatePath: ValidatePodGroupPath,
		New: func() Object { return &schedulingv1beta1.PodGroup{} }, Default: engine(PodGroup), CarryOver: CarryOverDropped},
	{Kind: KindJobSet, GVK: jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"), Resource: "jobsets",
		MutatePath: MutateJobSetPath, ValidatePath: ValidateJobSetPath,
		New: func() Object { return &jobsetv1alpha2.JobSet{} }, Default: engine(JobSet), CarryOver: CarryOverDropped},
	{Kind: KindHyperJob, GVK: trainingv1alpha1.SchemeGroupVersion.WithKind("HyperJob"), Resource: "hyperjobs",
		MutatePath: MutateHyperJobPath, ValidatePath: ValidateHyperJobPath,
		New: func() Object { return &trainingv1alpha1.HyperJob{} }, Default: engine(HyperJob), CarryOver: CarryOverDropped},
	// Kubeflow Trainer's TrainJob, as an unstructured object (trainjob.go).
	{Kind: KindTrainJob, GVK: TrainJobGVK, Resource: "trainjobs",
		MutatePath: MutateTrainJobPath, ValidatePath: ValidateTrainJobPath,
		New: func() Object { return NewTrainJob() }, Default: engine(TrainJob), CarryOver: CarryOverDropped},
	{Kind: KindPropagationPolicy, GVK: policyv1alpha1.SchemeGroupVersion.WithKind("PropagationPolicy"), Resource: "propagationpolicies",
		MutatePath: MutatePropagationPolicyPath, ValidatePath: ValidatePropagationPolicyPath,
		New: func() Object { return &policyv1alpha1.PropagationPolicy{} }, Default: engine(PropagationPolicy), CarryOver: CarryOverDropped},
	{Kind: KindWorkloadPolicy, GVK: hbv1.GroupVersion.WithKind("WorkloadPolicy"), Resource: "workloadpolicies", ClusterScoped: true,
		ValidatePath: ValidateWorkloadPolicyPath,
		New:          func() Object { return &hbv1.WorkloadPolicy{} }, CarryOver: CarryOverNone},
}

// Kinds returns the kind table, in the order the webhook configurations list the kinds.
func Kinds() []KindSpec { return slices.Clone(kindTable) }

// KindNames are the kinds of the table, in its order.
func KindNames() []Kind {
	out := make([]Kind, len(kindTable))
	for i := range kindTable {
		out[i] = kindTable[i].Kind
	}
	return out
}

// LookupKind returns the row of kind k.
func LookupKind(k Kind) (KindSpec, bool) {
	for i := range kindTable {
		if kindTable[i].Kind == k {
			return kindTable[i], true
		}
	}
	return KindSpec{}, false
}

// ParseKinds reads a comma-separated list of kinds ("VolcanoJob,HyperJob"; "*" for all; spaces
// around names are ignored; names are matched ignoring case). An unknown name is an error that lists
// the valid kinds; an empty list is an error too (a manager that serves no kind would serve nothing).
func ParseKinds(list string) ([]Kind, error) {
	list = strings.TrimSpace(list)
	if list == "*" {
		return KindNames(), nil
	}
	var out []Kind
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(kindTable, func(s KindSpec) bool { return strings.EqualFold(string(s.Kind), name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown kind %q; valid kinds are %s, or * for all", name, kindList())
		}
		if !slices.Contains(out, kindTable[i].Kind) {
			out = append(out, kindTable[i].Kind)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no kind given; valid kinds are %s, or * for all", kindList())
	}
	return out, nil
}

func kindList() string {
	names := make([]string, len(kindTable))
	for i := range kindTable {
		names[i] = string(kindTable[i].Kind)
	}
	return strings.Join(names, ", ")
}
