package podgroup

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// MinMemberAnnotation on a JobSet overrides the computed minMember. It is Volcano's own PodGroup key
// (scheduling.volcano.sh/group-min-member), so a manifest written for Volcano means the same here.
const MinMemberAnnotation = schedulingv1beta1.VolcanoGroupMinMemberAnnotationKey

// podsAtOnce is the number of pods one Job of a replicatedJob runs at the same time:
// min(parallelism, completions) with the Job API's defaults (parallelism 1; completions unset means
// "as many as parallelism").
func podsAtOnce(spec *jobsetv1alpha2.ReplicatedJob) int64 {
	par := int64(1)
	if p := spec.Template.Spec.Parallelism; p != nil {
		par = int64(*p)
	}
	if c := spec.Template.Spec.Completions; c != nil && int64(*c) < par {
		return int64(*c)
	}
	return par
}

// replicas is a replicatedJob's number of Jobs (JobSet's default is 1).
func replicas(spec *jobsetv1alpha2.ReplicatedJob) int64 {
	return int64(spec.Replicas)
}

// MinMember is the number of pods the gang needs at once: the sum over replicatedJobs of
// replicas × min(parallelism, completions), unless the JobSet's MinMemberAnnotation overrides it.
// A malformed override is an error naming the annotation and the fix.
func MinMember(js *jobsetv1alpha2.JobSet) (int32, error) {
	if v, ok := js.Annotations[MinMemberAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("annotation %s=%q is not a positive integer: set it to the number of pods the gang needs at once, or remove it to use the computed value", MinMemberAnnotation, v)
		}
		return int32(n), nil
	}
	var sum int64
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		sum += replicas(rj) * podsAtOnce(rj)
	}
	if sum > 1<<31-1 {
		return 0, fmt.Errorf("spec.replicatedJobs: %d pods at once overflow minMember (int32): set annotation %s", sum, MinMemberAnnotation)
	}
	return int32(sum), nil
}

// Admission is what the apiserver's admission adds to a pod's resources: the namespace's
// LimitRanges and the RuntimeClasses' overhead.
type Admission struct {
	// LimitRanges of the JobSet's namespace.
	LimitRanges []corev1.LimitRange
	// RuntimeClasses by name.
	RuntimeClasses map[string]*nodev1.RuntimeClass
}

// containerDefaults is the LimitRanger plugin's view of a namespace: per resource, the default
// request and the default limit of the first LimitRange (by name) that names it.
type containerDefaults struct {
	request, limit corev1.ResourceList
}

func (a Admission) containerDefaults() containerDefaults {
	lrs := make([]*corev1.LimitRange, 0, len(a.LimitRanges))
	for i := range a.LimitRanges {
		lrs = append(lrs, &a.LimitRanges[i])
	}
	sort.Slice(lrs, func(i, j int) bool { return lrs[i].Name < lrs[j].Name })
	d := containerDefaults{request: corev1.ResourceList{}, limit: corev1.ResourceList{}}
	for _, lr := range lrs {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for name, q := range item.Default {
				if _, ok := d.limit[name]; !ok {
					d.limit[name] = q.DeepCopy()
				}
			}
			for name, q := range item.DefaultRequest {
				if _, ok := d.request[name]; !ok {
					d.request[name] = q.DeepCopy()
				}
			}
			// The apiserver defaults a LimitRange's defaultRequest to its default (limit); a
			// LimitRange built in memory may not have been through that yet.
			for name, q := range item.Default {
				if _, ok := item.DefaultRequest[name]; ok {
					continue
				}
				if _, ok := d.request[name]; !ok {
					d.request[name] = q.DeepCopy()
				}
			}
		}
	}
	return d
}

// admitContainer is a container's resources after Pod defaulting (a limit without a request becomes
// the request) and the LimitRanger plugin (default limits and default requests fill what is missing;
// a default limit that fills a limit becomes the request unless a default request exists).
func (d containerDefaults) admitContainer(c *corev1.Container) {
	req := corev1.ResourceList{}
	for name, q := range c.Resources.Requests {
		req[name] = q.DeepCopy()
	}
	for name, q := range c.Resources.Limits {
		if _, ok := req[name]; !ok {
			req[name] = q.DeepCopy()
		}
	}
	for name, q := range d.request {
		if _, ok := req[name]; !ok {
			req[name] = q.DeepCopy()
		}
	}
	c.Resources.Requests = req
}

// PodRequests is the effective request of one pod made from tmpl, as the apiserver admits it:
// LimitRange defaults applied to every container, then the effective-request rule (the larger of
// the largest init container and the sum of the app containers, with sidecar init containers,
// restartPolicy Always, added to both per KEP-753), plus the RuntimeClass overhead. An unknown
// RuntimeClass is an error: the apiserver would refuse the pod.
func (a Admission) PodRequests(tmpl *corev1.PodTemplateSpec) (corev1.ResourceList, error) {
	d := a.containerDefaults()
	pod := &corev1.Pod{Spec: *tmpl.Spec.DeepCopy()}
	for i := range pod.Spec.InitContainers {
		d.admitContainer(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		d.admitContainer(&pod.Spec.Containers[i])
	}
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		class, ok := a.RuntimeClasses[*rc]
		if !ok {
			return nil, fmt.Errorf("runtimeClassName %q: no such RuntimeClass: create it or remove runtimeClassName from the pod template", *rc)
		}
		pod.Spec.Overhead = nil
		if class.Overhead != nil {
			pod.Spec.Overhead = class.Overhead.PodFixed.DeepCopy()
		}
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), nil
}

// MinResources is the sum of every pod's effective request over the pods the gang runs at once
// (replicas × min(parallelism, completions) per replicatedJob).
func MinResources(js *jobsetv1alpha2.JobSet, a Admission) (corev1.ResourceList, error) {
	total := corev1.ResourceList{}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		n := replicas(rj) * podsAtOnce(rj)
		if n == 0 {
			continue
		}
		per, err := a.PodRequests(&rj.Template.Spec.Template)
		if err != nil {
			return nil, fmt.Errorf("spec.replicatedJobs[%d] (%s).template.spec.template.spec.%w", i, rj.Name, err)
		}
		addResources(total, per, n)
	}
	if len(total) == 0 {
		return nil, nil
	}
	return total, nil
}
