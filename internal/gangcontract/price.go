package gangcontract

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// Price is what a gang reserves of its Queue's capability while it is Inqueue or Running: its
// PodGroup's spec.minResources, raised, for a PodGroup that Volcano's job controller made for a
// Volcano Job, to the effective requests of the pods that controller counts in minResources.
//
// Volcano's job controller prices a Job's PodGroup from the pod templates as written (quota usage of
// spec.containers[*].resources.requests), so a resource a template puts only in limits (the usual
// way to write nvidia.com/gpu) is missing from minResources. Kubernetes gives such a pod a request
// equal to its limit when it is created, and the scheduler counts that request; Price counts it
// too, so a Queue's capability holds for those gangs. Each resource of the result is the larger of
// minResources and the effective sum (minResources keeps the ResourceQuota-style entries Volcano adds,
// such as requests.cpu or pods, which a capability may name).
//
// job is the PodGroup's owning Volcano Job (nil for a PodGroup of no Job: its minResources is the
// price); priority gives a PriorityClass's value (0 when it does not exist), which orders the tasks as
// Volcano does. The result is a new list; nil when both are empty.
func Price(minResources *corev1.ResourceList, job *batchv1alpha1.Job, priority func(class string) int32) corev1.ResourceList {
	var out corev1.ResourceList
	if minResources != nil {
		out = minResources.DeepCopy()
	}
	if job == nil {
		return out
	}
	for name, q := range VolcanoJobRequests(job, priority) {
		if have, ok := out[name]; ok && have.Cmp(q) >= 0 {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[name] = q
	}
	return out
}

// VolcanoJobRequests sums the effective requests (EffectiveRequests) of the pods of a Volcano Job
// that Volcano's job controller counts in its PodGroup's minResources: tasks in order of their pod
// template's priority (highest first; ties in spec order), and
//   - when spec.minAvailable is below the sum of the tasks' minAvailable (a task without one counts
//     its replicas), the first minAvailable pods in that order;
//   - otherwise each task's minAvailable pods (capped at what is left of spec.minAvailable), then
//     the tasks' other replicas in the same order until spec.minAvailable pods are counted.
func VolcanoJobRequests(job *batchv1alpha1.Job, priority func(class string) int32) corev1.ResourceList {
	type task struct {
		prio int32
		spec *batchv1alpha1.TaskSpec
	}
	tasks := make([]task, 0, len(job.Spec.Tasks))
	var totalMin int32
	for i := range job.Spec.Tasks {
		t := &job.Spec.Tasks[i]
		var p int32
		if pc := t.Template.Spec.PriorityClassName; pc != "" && priority != nil {
			p = priority(pc)
		}
		tasks = append(tasks, task{prio: p, spec: t})
		if t.MinAvailable != nil {
			totalMin += *t.MinAvailable
		} else {
			totalMin += t.Replicas
		}
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].prio > tasks[j].prio })
	out := corev1.ResourceList{}
	add := func(t *batchv1alpha1.TaskSpec, n int32) {
		if n <= 0 {
			return
		}
		for name, q := range EffectiveRequests(&t.Template.Spec) {
			q.Mul(int64(n))
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	left := job.Spec.MinAvailable
	if left < totalMin {
		for _, t := range tasks {
			n := min(t.spec.Replicas, left)
			add(t.spec, n)
			if left -= n; left <= 0 {
				break
			}
		}
		return out
	}
	for _, t := range tasks { // each task's minAvailable first
		if t.spec.MinAvailable == nil {
			continue
		}
		n := min(*t.spec.MinAvailable, left)
		add(t.spec, n)
		left -= n
	}
	for _, t := range tasks { // then the rest of the replicas
		if left <= 0 {
			break
		}
		rest := t.spec.Replicas
		if t.spec.MinAvailable != nil {
			rest -= *t.spec.MinAvailable
		}
		n := min(max(rest, 0), left)
		add(t.spec, n)
		left -= n
	}
	return out
}

// EffectiveRequests is what one pod made from spec requests, as the scheduler counts it
// (resourcehelper.PodRequests: containers, init and sidecar containers, overhead, pod-level
// resources), after Kubernetes' defaulting of a container's requests: a resource set only in limits
// is requested at its limit.
func EffectiveRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			defaultRequests(&cs[i].Resources)
		}
	}
	if pod.Spec.Resources != nil {
		defaultRequests(pod.Spec.Resources)
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// defaultRequests gives a resource in limits and not in requests a request equal to its limit, as
// the apiserver does when it creates a pod.
func defaultRequests(r *corev1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = q.DeepCopy()
	}
}
