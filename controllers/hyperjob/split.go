package hyperjob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/naming"
)

// Split is how one replica of a replicatedJob's template becomes child Volcano Jobs.
type Split struct {
	// Parts is the number of children one replica of the template is split into (1 without a split
	// policy). A replicatedJob has Replicas × Parts children.
	Parts int32
	// Demand is the template's accelerator demand per replica (0 without a split policy).
	Demand int64
	// Template is the spec every child of the replicatedJob gets (before WorkloadPolicy defaults).
	Template batchv1alpha1.JobSpec
	// Auto is set for mode auto: what one child needs, for the decision of where it goes
	// (autosplit.go).
	Auto *AutoChild
}

// AutoChild is one child of a replicatedJob in mode auto as the decision sees it.
type AutoChild struct {
	// Resource is splitPolicy.acceleratorType.
	Resource corev1.ResourceName
	// Pods is the number of the child's pods that request Resource; PodDemand what each requests.
	Pods      int
	PodDemand int64
	// Tier is the highest HyperNode tier the child may span (the template's networkTopology
	// highestTierAllowed in mode hard), 0 for no limit.
	Tier int
}

// Refusal says why the controller will not create or change children for a HyperJob. It becomes a
// status condition (Type = Condition, Status True) and a Warning Event.
type Refusal struct {
	Condition string
	Reason    string
	Message   string
}

func splitRefusal(reason, rj, format string, args ...any) *Refusal {
	return &Refusal{Condition: ConditionSplitPolicyInvalid, Reason: reason,
		Message: fmt.Sprintf("replicatedJob %q: ", rj) + fmt.Sprintf(format, args...)}
}

// SplitReplicatedJob applies a replicatedJob's splitPolicy (docs/hyperjob.md, "Split policy"):
//
//   - no splitPolicy (or an empty mode): one child per replica, the template unchanged.
//   - mode static or auto: with A = splitPolicy.accelerators (per child) and T = splitPolicy.acceleratorType,
//     the template's demand D = Σ over tasks of replicas × (the pod's demand of T) must be a positive
//     multiple of A; one replica then becomes N = D / A children. A task whose pods demand T has its
//     replicas (and minAvailable) divided by N, which must divide them; a task whose pods demand
//     none is copied whole into every child, since each child is a complete Volcano Job that needs
//     its own coordinator pods. The job's minAvailable and minSuccess m become U + (m−U)/N, where U
//     counts the pods of the copied tasks; 0 (unset) stays 0. Every child then demands exactly A.
//   - mode auto also decides where each child goes (autosplit.go); for that every pod that requests
//     T must request the same amount, and a hard networkTopology must name its tier by
//     highestTierAllowed.
//
// The template is deep-copied; rj is not modified.
func SplitReplicatedJob(rj *trainingv1alpha1.ReplicatedJob) (Split, *Refusal) {
	sp := rj.SplitPolicy
	if sp == nil || sp.Mode == "" {
		return Split{Parts: 1, Template: *rj.TemplateSpec.DeepCopy()}, nil
	}
	switch sp.Mode {
	case trainingv1alpha1.SplitModeStatic, trainingv1alpha1.SplitModeAuto:
	default:
		return Split{}, splitRefusal(ReasonUnknownSplitMode, rj.Name, "splitPolicy.mode %q is neither static nor auto", sp.Mode)
	}
	if sp.AcceleratorType == nil || *sp.AcceleratorType == "" {
		return Split{}, splitRefusal(ReasonMissingAcceleratorType, rj.Name, "splitPolicy.mode %s needs acceleratorType (e.g. nvidia.com/gpu)", sp.Mode)
	}
	if sp.Accelerators == nil || *sp.Accelerators <= 0 {
		return Split{}, splitRefusal(ReasonMissingAccelerators, rj.Name,
			"splitPolicy.mode %s needs accelerators > 0 (the number of %s each child job gets)", sp.Mode, *sp.AcceleratorType)
	}
	res := corev1.ResourceName(*sp.AcceleratorType)
	perChild := int64(*sp.Accelerators)

	tasks := rj.TemplateSpec.Tasks
	perPod := make([]int64, len(tasks))
	var demand int64
	for i := range tasks {
		d, err := PodDemand(&tasks[i].Template.Spec, res)
		if err != nil {
			return Split{}, splitRefusal(ReasonInvalidAcceleratorQuantity, rj.Name, "task %q: %v", tasks[i].Name, err)
		}
		perPod[i] = d
		demand += int64(tasks[i].Replicas) * d
	}
	if demand == 0 {
		return Split{}, splitRefusal(ReasonNoAcceleratorDemand, rj.Name,
			"the template requests no %s, so it cannot be split into children of %d", res, perChild)
	}
	if demand%perChild != 0 {
		return Split{}, splitRefusal(ReasonNotDivisible, rj.Name,
			"the template requests %d %s in total, which is not a multiple of accelerators=%d", demand, res, perChild)
	}
	n := demand / perChild
	if n > naming.MaxChildren {
		return Split{}, splitRefusal(ReasonNotDivisible, rj.Name,
			"splitting %d %s into children of %d gives %d children per replica, more than the limit of %d children per HyperJob",
			demand, res, perChild, n, naming.MaxChildren)
	}
	parts := int32(n)

	child := *rj.TemplateSpec.DeepCopy()
	var copiedPods int32 // U: pods of tasks copied whole into every child
	for i := range child.Tasks {
		t := &child.Tasks[i]
		if perPod[i] == 0 {
			copiedPods += t.Replicas
			continue
		}
		if t.Replicas%parts != 0 {
			return Split{}, splitRefusal(ReasonNotDivisible, rj.Name,
				"the template requests %d %s, so one replica becomes %d children of %d, but task %q has %d replicas (%d %s each), which %d children cannot share equally",
				demand, res, parts, perChild, t.Name, t.Replicas, perPod[i], res, parts)
		}
		t.Replicas /= parts
		if t.MinAvailable != nil {
			if *t.MinAvailable%parts != 0 {
				return Split{}, splitRefusal(ReasonNotDivisible, rj.Name,
					"task %q: minAvailable %d cannot be divided among %d children", t.Name, *t.MinAvailable, parts)
			}
			v := *t.MinAvailable / parts
			t.MinAvailable = &v
		}
	}
	scale := func(field string, m int32) (int32, *Refusal) {
		if m <= 0 {
			return m, nil
		}
		if m < copiedPods || (m-copiedPods)%parts != 0 {
			return 0, splitRefusal(ReasonNotDivisible, rj.Name,
				"templateSpec.%s %d cannot be divided among %d children: it must be %d (the pods of tasks that request no %s, copied into every child) plus a multiple of %d",
				field, m, parts, copiedPods, res, parts)
		}
		return copiedPods + (m-copiedPods)/parts, nil
	}
	var ref *Refusal
	if child.MinAvailable, ref = scale("minAvailable", child.MinAvailable); ref != nil {
		return Split{}, ref
	}
	if child.MinSuccess != nil {
		v, ref := scale("minSuccess", *child.MinSuccess)
		if ref != nil {
			return Split{}, ref
		}
		child.MinSuccess = &v
	}
	out := Split{Parts: parts, Demand: demand, Template: child}
	if sp.Mode == trainingv1alpha1.SplitModeAuto {
		a, ref := autoChild(rj.Name, res, &child, perPod)
		if ref != nil {
			return Split{}, ref
		}
		out.Auto = a
	}
	return out, nil
}

// autoChild describes one child of mode auto: its accelerator pods, their common demand and its
// tier.
func autoChild(rj string, res corev1.ResourceName, child *batchv1alpha1.JobSpec, perPod []int64) (*AutoChild, *Refusal) {
	a := &AutoChild{Resource: res}
	first := -1
	for i := range child.Tasks {
		if perPod[i] == 0 {
			continue
		}
		if first >= 0 && perPod[i] != perPod[first] {
			return nil, splitRefusal(ReasonMixedPodDemand, rj,
				"splitPolicy.mode auto needs every pod that requests %s to request the same amount, but task %q requests %d and task %q %d per pod (templateSpec.tasks[].template)",
				res, child.Tasks[first].Name, perPod[first], child.Tasks[i].Name, perPod[i])
		}
		if first < 0 {
			first = i
		}
		a.Pods += int(child.Tasks[i].Replicas)
		a.PodDemand = perPod[i]
	}
	if nt := child.NetworkTopology; nt != nil && nt.Mode != batchv1alpha1.SoftNetworkTopologyMode {
		if nt.HighestTierName != "" {
			return nil, splitRefusal(ReasonUnsupportedTopology, rj,
				"splitPolicy.mode auto reads templateSpec.networkTopology.highestTierAllowed; highestTierName %q is not supported: set highestTierAllowed instead", nt.HighestTierName)
		}
		if nt.HighestTierAllowed != nil {
			a.Tier = *nt.HighestTierAllowed
		}
	}
	return a, nil
}

// PodDemand is how much of res one pod of spec needs, by Kubernetes' effective-request rule:
// max(Σ app containers + Σ sidecars, max over ordinary init containers of (its amount + the
// sidecars declared before it)). A container's amount is its request of res, or its limit when it
// sets no request (Kubernetes defaults an extended resource's request to its limit). Amounts must be
// whole numbers.
func PodDemand(spec *corev1.PodSpec, res corev1.ResourceName) (int64, error) {
	var app, sidecars, initPeak int64
	for i := range spec.Containers {
		v, err := containerAmount(&spec.Containers[i], res)
		if err != nil {
			return 0, err
		}
		app += v
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		v, err := containerAmount(c, res)
		if err != nil {
			return 0, err
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += v
			continue
		}
		initPeak = max(initPeak, v+sidecars)
	}
	return max(app+sidecars, initPeak), nil
}

func containerAmount(c *corev1.Container, res corev1.ResourceName) (int64, error) {
	q, ok := c.Resources.Requests[res]
	if !ok {
		q, ok = c.Resources.Limits[res]
	}
	if !ok {
		return 0, nil
	}
	return wholeQuantity(c.Name, res, q)
}

func wholeQuantity(container string, res corev1.ResourceName, q resource.Quantity) (int64, error) {
	if q.Sign() < 0 {
		return 0, fmt.Errorf("container %q asks for a negative amount of %s (%s)", container, res, q.String())
	}
	if q.MilliValue()%1000 != 0 {
		return 0, fmt.Errorf("container %q asks for %s %s, which is not a whole number", container, q.String(), res)
	}
	return q.Value(), nil
}
