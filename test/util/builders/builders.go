// Package builders builds the objects tests share: WorkloadPolicies, Namespaces, PriorityClasses,
// HyperJobs and their replicatedJobs. Each wrapper starts from a minimal valid object, has one
// method per thing a test varies, and returns the object with Obj(), after kueue's
// pkg/util/testingjobs wrappers:
//
//	pol := builders.MakePolicy("team-a").Weight(10).Selector("team", "a").Queue("team-a").Obj()
//	hj := builders.MakeHyperJob("ns", "llm").ReplicatedJobs(builders.MakeReplicatedJob("w", 2).Obj()).Obj()
package builders

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// GPU is the extended resource name tests ask GPUs with.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// PolicyWrapper builds a WorkloadPolicy.
type PolicyWrapper struct{ hbv1.WorkloadPolicy }

// MakePolicy is a policy with no selector (it governs every namespace), weight 0 and no defaults.
func MakePolicy(name string) *PolicyWrapper {
	return &PolicyWrapper{hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns a pointer to the policy.
func (w *PolicyWrapper) Obj() *hbv1.WorkloadPolicy { return &w.WorkloadPolicy }

// Weight sets spec.weight.
func (w *PolicyWrapper) Weight(weight int32) *PolicyWrapper {
	w.Spec.Weight = weight
	return w
}

// Selector makes the policy govern the namespaces labelled key=value (adding to earlier labels).
func (w *PolicyWrapper) Selector(key, value string) *PolicyWrapper {
	if w.Spec.NamespaceSelector == nil {
		w.Spec.NamespaceSelector = &metav1.LabelSelector{}
	}
	if w.Spec.NamespaceSelector.MatchLabels == nil {
		w.Spec.NamespaceSelector.MatchLabels = map[string]string{}
	}
	w.Spec.NamespaceSelector.MatchLabels[key] = value
	return w
}

// Queue sets spec.defaults.queue.
func (w *PolicyWrapper) Queue(q string) *PolicyWrapper {
	w.Spec.Defaults.Queue = q
	return w
}

// PriorityClass sets spec.defaults.priorityClassName.
func (w *PolicyWrapper) PriorityClass(name string) *PolicyWrapper {
	w.Spec.Defaults.PriorityClassName = name
	return w
}

// Scheduler sets spec.defaults.schedulerName.
func (w *PolicyWrapper) Scheduler(name string) *PolicyWrapper {
	w.Spec.Defaults.SchedulerName = name
	return w
}

// HardTopology sets spec.defaults.networkTopology to hard mode with highestTierAllowed tier.
func (w *PolicyWrapper) HardTopology(tier int32) *PolicyWrapper {
	w.Spec.Defaults.NetworkTopology = &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyHard, HighestTierAllowed: ptr.To(tier)}
	return w
}

// Lifecycle sets spec.defaults.ttlSecondsAfterFinished and activeDeadlineSeconds.
func (w *PolicyWrapper) Lifecycle(ttl int32, deadline int64) *PolicyWrapper {
	w.Spec.Defaults.TTLSecondsAfterFinished, w.Spec.Defaults.ActiveDeadlineSeconds = ptr.To(ttl), ptr.To(deadline)
	return w
}

// Propagation sets spec.defaults.propagation.
func (w *PolicyWrapper) Propagation(p hbv1.Propagation) *PolicyWrapper {
	w.Spec.Defaults.Propagation = &p
	return w
}

// AllowedQueues sets spec.allowedQueues.
func (w *PolicyWrapper) AllowedQueues(queues ...string) *PolicyWrapper {
	w.Spec.AllowedQueues = queues
	return w
}

// AllowedClusters sets spec.allowedClusters.
func (w *PolicyWrapper) AllowedClusters(clusters ...string) *PolicyWrapper {
	w.Spec.AllowedClusters = clusters
	return w
}

// InvalidSelector gives the policy a namespaceSelector the apiserver stores but that cannot be
// parsed (an unknown operator), as stored before admission refused such selectors.
func (w *PolicyWrapper) InvalidSelector() *PolicyWrapper {
	w.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "team", Operator: "Bogus", Values: []string{"a"}}}}
	return w
}

// TeamA is the policy most tests use: it governs namespaces labelled team=a with weight 10, sets
// every default (queue team-a, class batch-normal, scheduler hyperbatch-scheduler, hard topology at
// tier 2, TTL one day, deadline one week, propagation to clusters a and b, aggregated, at most one
// cluster, with dependencies) and allows the queues team-a and shared.
func TeamA() *PolicyWrapper {
	return MakePolicy("team-a").Weight(10).Selector("team", "a").
		Queue("team-a").PriorityClass("batch-normal").Scheduler("hyperbatch-scheduler").HardTopology(2).
		Lifecycle(86400, 604800).
		Propagation(hbv1.Propagation{ClusterNames: []string{"a", "b"}, ReplicaDivisionPreference: "Aggregated",
			MaxClusters: ptr.To[int32](1), PropagateDeps: ptr.To(true)}).
		AllowedQueues("team-a", "shared")
}

// Namespace is a Namespace with these labels and annotations (either may be nil).
func Namespace(name string, labels, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

// PriorityClass is a PriorityClass of this value that preempts lower priorities.
func PriorityClass(name string, value int32) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}
}

// PodTemplate is a pod with one container "main" of this image, asking for gpus GPUs as a limit
// (0: none).
func PodTemplate(image string, gpus int64) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "main", Image: image}
	if gpus > 0 {
		c.Resources.Limits = corev1.ResourceList{GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// ReplicatedJobWrapper builds a HyperJob replicatedJob.
type ReplicatedJobWrapper struct{ trainingv1alpha1.ReplicatedJob }

// MakeReplicatedJob is a replicatedJob of replicas Volcano Jobs, each with minAvailable 1 and one
// task "worker" of one busybox pod.
func MakeReplicatedJob(name string, replicas int32) *ReplicatedJobWrapper {
	return &ReplicatedJobWrapper{trainingv1alpha1.ReplicatedJob{Name: name, Replicas: replicas,
		TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{
			{Name: "worker", Replicas: 1, Template: PodTemplate("busybox:1", 0)}}}}}
}

// Obj returns the replicatedJob.
func (w *ReplicatedJobWrapper) Obj() trainingv1alpha1.ReplicatedJob { return w.ReplicatedJob }

// Clusters sets clusterNames.
func (w *ReplicatedJobWrapper) Clusters(names ...string) *ReplicatedJobWrapper {
	w.ClusterNames = names
	return w
}

// Template sets the pod template of every task.
func (w *ReplicatedJobWrapper) Template(t corev1.PodTemplateSpec) *ReplicatedJobWrapper {
	for i := range w.TemplateSpec.Tasks {
		w.TemplateSpec.Tasks[i].Template = t
	}
	return w
}

// HyperJobWrapper builds a HyperJob.
type HyperJobWrapper struct{ trainingv1alpha1.HyperJob }

// MakeHyperJob is a HyperJob with no replicatedJobs.
func MakeHyperJob(namespace, name string) *HyperJobWrapper {
	return &HyperJobWrapper{trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}}
}

// Obj returns a pointer to the HyperJob.
func (w *HyperJobWrapper) Obj() *trainingv1alpha1.HyperJob { return &w.HyperJob }

// ReplicatedJobs appends replicatedJobs.
func (w *HyperJobWrapper) ReplicatedJobs(rjs ...trainingv1alpha1.ReplicatedJob) *HyperJobWrapper {
	w.Spec.ReplicatedJobs = append(w.Spec.ReplicatedJobs, rjs...)
	return w
}
