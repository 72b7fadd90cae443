// Package snapshot is what kubectl-hyperbatch reads from a cluster: the objects of the kinds its
// commands explain, listed once per command, or decoded from recorded YAML (the unit tests' input).
// The commands are pure functions of a Snapshot.
package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// Snapshot holds the objects one command reads. Lists of kinds the command did not ask for, or
// whose CRD the cluster does not serve, are empty.
type Snapshot struct {
	Policies            []hbv1.WorkloadPolicy
	Namespaces          []corev1.Namespace
	Nodes               []corev1.Node
	HyperNodes          []topologyv1alpha1.HyperNode
	Pods                []corev1.Pod
	PodGroups           []schedulingv1beta1.PodGroup
	Queues              []schedulingv1beta1.Queue
	PriorityClasses     []schedulingv1.PriorityClass
	Events              []corev1.Event
	VolcanoJobs         []batchv1alpha1.Job
	JobSets             []jobsetv1alpha2.JobSet
	HyperJobs           []trainingv1alpha1.HyperJob
	PropagationPolicies []policyv1alpha1.PropagationPolicy
}

// Part names one list of a Snapshot.
type Part int

// The lists a command may ask for.
const (
	Policies Part = iota
	Namespaces
	Nodes
	HyperNodes
	Pods
	PodGroups
	Queues
	PriorityClasses
	Events
	VolcanoJobs
	JobSets
	HyperJobs
	PropagationPolicies
)

// list returns the empty list object of part p and the function that stores it into s.
func (s *Snapshot) list(p Part) (client.ObjectList, func()) {
	switch p {
	case Policies:
		l := &hbv1.WorkloadPolicyList{}
		return l, func() { s.Policies = l.Items }
	case Namespaces:
		l := &corev1.NamespaceList{}
		return l, func() { s.Namespaces = l.Items }
	case Nodes:
		l := &corev1.NodeList{}
		return l, func() { s.Nodes = l.Items }
	case HyperNodes:
		l := &topologyv1alpha1.HyperNodeList{}
		return l, func() { s.HyperNodes = l.Items }
	case Pods:
		l := &corev1.PodList{}
		return l, func() { s.Pods = l.Items }
	case PodGroups:
		l := &schedulingv1beta1.PodGroupList{}
		return l, func() { s.PodGroups = l.Items }
	case Queues:
		l := &schedulingv1beta1.QueueList{}
		return l, func() { s.Queues = l.Items }
	case PriorityClasses:
		l := &schedulingv1.PriorityClassList{}
		return l, func() { s.PriorityClasses = l.Items }
	case Events:
		l := &corev1.EventList{}
		return l, func() { s.Events = l.Items }
	case VolcanoJobs:
		l := &batchv1alpha1.JobList{}
		return l, func() { s.VolcanoJobs = l.Items }
	case JobSets:
		l := &jobsetv1alpha2.JobSetList{}
		return l, func() { s.JobSets = l.Items }
	case HyperJobs:
		l := &trainingv1alpha1.HyperJobList{}
		return l, func() { s.HyperJobs = l.Items }
	case PropagationPolicies:
		l := &policyv1alpha1.PropagationPolicyList{}
		return l, func() { s.PropagationPolicies = l.Items }
	}
	return nil, func() {}
}

// namespaced reports whether part p is listed in one namespace when a command is given one.
func namespaced(p Part) bool {
	switch p {
	case Policies, Namespaces, Nodes, HyperNodes, Queues, PriorityClasses:
		return false
	}
	return true
}

// Load lists the parts from the cluster. namespace "" lists namespaced kinds in every namespace. A
// kind the cluster does not serve (its CRD is not installed) is left empty; any other error stops.
func Load(ctx context.Context, r client.Reader, namespace string, parts ...Part) (*Snapshot, error) {
	s := &Snapshot{}
	for _, p := range parts {
		l, store := s.list(p)
		if l == nil {
			return nil, fmt.Errorf("snapshot: unknown part %d", p)
		}
		var opts []client.ListOption
		if namespace != "" && namespaced(p) {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := r.List(ctx, l, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("listing %T: %w", l, err)
		}
		store()
	}
	return s, nil
}

// Decode reads recorded objects: YAML or JSON documents, each an object or a List (as
// `kubectl get -o yaml` writes it), of the kinds a Snapshot holds. Other kinds are an error.
func Decode(data []byte) (*Snapshot, error) {
	codecs := serializer.NewCodecFactory(scheme.New())
	dec := codecs.UniversalDeserializer()
	s := &Snapshot{}
	rd := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw runtime.RawExtension
		if err := rd.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return s, nil
			}
			return nil, fmt.Errorf("reading recorded objects: %w", err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		if err := s.addRaw(dec, raw.Raw); err != nil {
			return nil, err
		}
	}
}

func (s *Snapshot) addRaw(dec runtime.Decoder, raw []byte) error {
	obj, gvk, err := dec.Decode(raw, nil, nil)
	if err != nil {
		return fmt.Errorf("decoding a recorded object: %w", err)
	}
	if l, ok := obj.(*corev1.List); ok {
		for _, it := range l.Items {
			if err := s.addRaw(dec, it.Raw); err != nil {
				return err
			}
		}
		return nil
	}
	if !s.add(obj) {
		return fmt.Errorf("recorded object of kind %s: not a kind kubectl-hyperbatch reads", gvk)
	}
	return nil
}

// add appends obj to its list; false when its kind is not one a Snapshot holds.
func (s *Snapshot) add(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *hbv1.WorkloadPolicy:
		s.Policies = append(s.Policies, *o)
	case *corev1.Namespace:
		s.Namespaces = append(s.Namespaces, *o)
	case *corev1.Node:
		s.Nodes = append(s.Nodes, *o)
	case *topologyv1alpha1.HyperNode:
		s.HyperNodes = append(s.HyperNodes, *o)
	case *corev1.Pod:
		s.Pods = append(s.Pods, *o)
	case *schedulingv1beta1.PodGroup:
		s.PodGroups = append(s.PodGroups, *o)
	case *schedulingv1beta1.Queue:
		s.Queues = append(s.Queues, *o)
	case *schedulingv1.PriorityClass:
		s.PriorityClasses = append(s.PriorityClasses, *o)
	case *corev1.Event:
		s.Events = append(s.Events, *o)
	case *batchv1alpha1.Job:
		s.VolcanoJobs = append(s.VolcanoJobs, *o)
	case *jobsetv1alpha2.JobSet:
		s.JobSets = append(s.JobSets, *o)
	case *trainingv1alpha1.HyperJob:
		s.HyperJobs = append(s.HyperJobs, *o)
	case *policyv1alpha1.PropagationPolicy:
		s.PropagationPolicies = append(s.PropagationPolicies, *o)
	default:
		return false
	}
	return true
}

// Namespace returns the namespace named name, nil when the snapshot has none.
func (s *Snapshot) Namespace(name string) *corev1.Namespace {
	for i := range s.Namespaces {
		if s.Namespaces[i].Name == name {
			return &s.Namespaces[i]
		}
	}
	return nil
}

// PodGroup returns the PodGroup namespace/name, nil when the snapshot has none.
func (s *Snapshot) PodGroup(namespace, name string) *schedulingv1beta1.PodGroup {
	for i := range s.PodGroups {
		if s.PodGroups[i].Namespace == namespace && s.PodGroups[i].Name == name {
			return &s.PodGroups[i]
		}
	}
	return nil
}

// Queue returns the Queue named name, nil when the snapshot has none.
func (s *Snapshot) Queue(name string) *schedulingv1beta1.Queue {
	for i := range s.Queues {
		if s.Queues[i].Name == name {
			return &s.Queues[i]
		}
	}
	return nil
}

// EventsOf returns the Events about the object with this uid, oldest first as listed.
func (s *Snapshot) EventsOf(uid string) []corev1.Event {
	var out []corev1.Event
	for _, e := range s.Events {
		if string(e.InvolvedObject.UID) == uid {
			out = append(out, e)
		}
	}
	return out
}
