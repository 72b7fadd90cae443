package builders

import (
	"encoding/json"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// PodTemplateWrapper builds a pod template: restartPolicy Never, one container.
type PodTemplateWrapper struct{ corev1.PodTemplateSpec }

// MakePodTemplate is a template of one container (name, image) that never restarts.
func MakePodTemplate(container, image string) *PodTemplateWrapper {
	return &PodTemplateWrapper{corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: container, Image: image}},
	}}}
}

// Obj returns the template.
func (w *PodTemplateWrapper) Obj() corev1.PodTemplateSpec { return w.PodTemplateSpec }

// Scheduler sets spec.schedulerName.
func (w *PodTemplateWrapper) Scheduler(name string) *PodTemplateWrapper {
	w.Spec.SchedulerName = name
	return w
}

// NodeSelector sets a node selector entry.
func (w *PodTemplateWrapper) NodeSelector(k, v string) *PodTemplateWrapper {
	set(&w.Spec.NodeSelector, k, v)
	return w
}

// Request sets the container's request of r (a quantity string).
func (w *PodTemplateWrapper) Request(r corev1.ResourceName, q string) *PodTemplateWrapper {
	c := &w.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[r] = resource.MustParse(q)
	return w
}

// Limit sets the container's limit of r (a quantity string).
func (w *PodTemplateWrapper) Limit(r corev1.ResourceName, q string) *PodTemplateWrapper {
	c := &w.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[r] = resource.MustParse(q)
	return w
}

// Annotation sets a pod-template annotation.
func (w *PodTemplateWrapper) Annotation(k, v string) *PodTemplateWrapper {
	set(&w.Annotations, k, v)
	return w
}

// JobWrapper builds a batch/v1 Job.
type JobWrapper struct{ batchv1.Job }

// MakeJob is an Indexed Job of pods pods (parallelism = completions) running template, no retries.
func MakeJob(namespace, name string, pods int32, template corev1.PodTemplateSpec) *JobWrapper {
	return &JobWrapper{batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(pods), Completions: ptr.To(pods), BackoffLimit: ptr.To[int32](0),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Template: template},
	}}
}

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// Label sets a label on the Job.
func (w *JobWrapper) Label(k, v string) *JobWrapper {
	set(&w.Labels, k, v)
	return w
}

// JobSetWrapper builds a JobSet.
type JobSetWrapper struct{ jobsetv1alpha2.JobSet }

// MakeJobSet is a JobSet with no replicatedJobs.
func MakeJobSet(namespace, name string) *JobSetWrapper {
	return &JobSetWrapper{jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}}
}

// Obj returns the JobSet.
func (w *JobSetWrapper) Obj() *jobsetv1alpha2.JobSet { return &w.JobSet }

// Annotation sets an annotation.
func (w *JobSetWrapper) Annotation(k, v string) *JobSetWrapper {
	set(&w.Annotations, k, v)
	return w
}

// ReplicatedJob appends a replicatedJob of replicas Jobs, each running pods pods at once to
// completion (backoffLimit 0) from template.
func (w *JobSetWrapper) ReplicatedJob(name string, replicas, pods int32, template corev1.PodTemplateSpec) *JobSetWrapper {
	w.Spec.ReplicatedJobs = append(w.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{
		Name: name, Replicas: replicas,
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods), BackoffLimit: ptr.To[int32](0), Template: template,
		}},
	})
	return w
}

// Manifest is the JobSet as YAML for kubectl (only the fields set).
func (w *JobSetWrapper) Manifest() (string, error) { return Manifest(&w.JobSet) }

// VolcanoJobWrapper builds a Volcano Job.
type VolcanoJobWrapper struct{ batchv1alpha1.Job }

// MakeVolcanoJob is a Volcano Job with no tasks (no queue, priority or scheduler).
func MakeVolcanoJob(namespace, name string) *VolcanoJobWrapper {
	return &VolcanoJobWrapper{batchv1alpha1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}}
}

// Obj returns the Job.
func (w *VolcanoJobWrapper) Obj() *batchv1alpha1.Job { return &w.Job }

// MinAvailable sets spec.minAvailable.
func (w *VolcanoJobWrapper) MinAvailable(n int32) *VolcanoJobWrapper {
	w.Spec.MinAvailable = n
	return w
}

// Scheduler sets spec.schedulerName.
func (w *VolcanoJobWrapper) Scheduler(name string) *VolcanoJobWrapper {
	w.Spec.SchedulerName = name
	return w
}

// Queue sets spec.queue.
func (w *VolcanoJobWrapper) Queue(q string) *VolcanoJobWrapper {
	w.Spec.Queue = q
	return w
}

// Label sets a label.
func (w *VolcanoJobWrapper) Label(k, v string) *VolcanoJobWrapper {
	set(&w.Labels, k, v)
	return w
}

// Task appends a task of replicas pods from template.
func (w *VolcanoJobWrapper) Task(name string, replicas int32, template corev1.PodTemplateSpec) *VolcanoJobWrapper {
	w.Spec.Tasks = append(w.Spec.Tasks, batchv1alpha1.TaskSpec{Name: name, Replicas: replicas, Template: template})
	return w
}

// Manifest is the Job as YAML for kubectl (only the fields set).
func (w *VolcanoJobWrapper) Manifest() (string, error) { return Manifest(&w.Job) }

// Manifest is obj as YAML for kubectl with only the fields a test set: the status and the null,
// empty-map and empty-list fields Go's zero values leave (creationTimestamp: null, resources: {})
// are dropped, so applying it sets nothing the test did not choose.
func Manifest(obj any) (string, error) {
	js, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encoding %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return "", fmt.Errorf("decoding %T: %w", obj, err)
	}
	delete(m, "status")
	prune(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encoding %T as YAML: %w", obj, err)
	}
	return string(out), nil
}

// prune drops nulls and empty maps and lists from m, deepest first.
func prune(m map[string]any) {
	for k, v := range m {
		if pruneValue(v) {
			delete(m, k)
		}
	}
}

func pruneValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		prune(x)
		return len(x) == 0
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				prune(m)
			}
		}
		return len(x) == 0
	}
	return false
}

// set sets m[k] = v, creating m when nil.
func set(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}
