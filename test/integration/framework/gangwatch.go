package framework

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// GangWatch records, from watches on a namespace's Pods and PodGroups opened before the gang's
// objects are written, what happened to one gang: the PodGroup's phases in the order they were
// written, the resourceVersion at which each phase was first seen, each write of its minResources
// (the cpu), the first time it carried a subGroupPolicy, and per pod of the JobSet of the same name
// (a TrainJob's JobSet has the TrainJob's name) the resourceVersion of its creation and of its
// binding (the first event with a nodeName). resourceVersions are etcd revisions, one counter for
// every resource of the cluster, so they order a pod's creation or binding against a PodGroup write.
type GangWatch struct {
	mu  sync.Mutex
	rec GangRecord
}

// GangRecord is what a GangWatch saw (a copy).
type GangRecord struct {
	// Phases are the PodGroup's phases, each change once, in the order written.
	Phases []schedulingv1beta1.PodGroupPhase
	// PhaseRV is the resourceVersion at which each phase was first seen.
	PhaseRV map[schedulingv1beta1.PodGroupPhase]uint64
	// Prices are the PodGroup's writes that carried minResources, in order.
	Prices []PriceWrite
	// SubGroupRV is the resourceVersion at which the PodGroup first had a subGroupPolicy (0: never).
	SubGroupRV uint64
	// Created and Bound are, per pod name, the resourceVersion of its creation and of its binding.
	Created, Bound map[string]uint64
}

// PriceWrite is one PodGroup write carrying minResources: its resourceVersion and the cpu.
type PriceWrite struct {
	RV  uint64
	CPU string
}

// WatchGang starts a GangWatch of the PodGroup (and JobSet) name in namespace ns through wc; the
// watches stop when the test ends.
func WatchGang(t testing.TB, wc client.WithWatch, ns, name string) *GangWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g := &GangWatch{rec: GangRecord{PhaseRV: map[schedulingv1beta1.PodGroupPhase]uint64{}, Created: map[string]uint64{}, Bound: map[string]uint64{}}}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &schedulingv1beta1.PodGroupList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				g.record(ev.Object, name)
			}
		}()
	}
	return g
}

func (g *GangWatch) record(o any, name string) {
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r := &g.rec
	switch x := obj.(type) {
	case *corev1.Pod:
		if x.Labels[jobsetv1alpha2.JobSetNameKey] != name {
			return
		}
		if _, seen := r.Created[x.Name]; !seen {
			r.Created[x.Name] = rv
		}
		if _, seen := r.Bound[x.Name]; !seen && x.Spec.NodeName != "" {
			r.Bound[x.Name] = rv
		}
	case *schedulingv1beta1.PodGroup:
		if x.Name != name {
			return
		}
		if ph := x.Status.Phase; ph != "" && (len(r.Phases) == 0 || r.Phases[len(r.Phases)-1] != ph) {
			r.Phases = append(r.Phases, ph)
			if _, seen := r.PhaseRV[ph]; !seen {
				r.PhaseRV[ph] = rv
			}
		}
		if x.Spec.MinResources != nil {
			cpu := (*x.Spec.MinResources)[corev1.ResourceCPU]
			r.Prices = append(r.Prices, PriceWrite{RV: rv, CPU: cpu.String()})
		}
		if len(x.Spec.SubGroupPolicy) > 0 && r.SubGroupRV == 0 {
			r.SubGroupRV = rv
		}
	}
}

// Snapshot is a copy of what the watch saw so far.
func (g *GangWatch) Snapshot() GangRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := GangRecord{
		Phases: append([]schedulingv1beta1.PodGroupPhase(nil), g.rec.Phases...), Prices: append([]PriceWrite(nil), g.rec.Prices...),
		SubGroupRV: g.rec.SubGroupRV,
		PhaseRV:    make(map[schedulingv1beta1.PodGroupPhase]uint64, len(g.rec.PhaseRV)),
		Created:    make(map[string]uint64, len(g.rec.Created)), Bound: make(map[string]uint64, len(g.rec.Bound)),
	}
	for k, v := range g.rec.PhaseRV {
		out.PhaseRV[k] = v
	}
	for k, v := range g.rec.Created {
		out.Created[k] = v
	}
	for k, v := range g.rec.Bound {
		out.Bound[k] = v
	}
	return out
}

// WaitPhase waits until the watch saw the PodGroup in phase.
func (g *GangWatch) WaitPhase(t testing.TB, timeout time.Duration, phase schedulingv1beta1.PodGroupPhase) {
	t.Helper()
	Eventually(t, timeout, "PodGroup phase "+string(phase), func(context.Context) (bool, error) {
		_, ok := g.Snapshot().PhaseRV[phase]
		return ok, nil
	})
}

// FirstPrice is the resourceVersion of the first PodGroup write whose minResources cpu equals cpu
// (0: none).
func (r GangRecord) FirstPrice(cpu string) uint64 {
	want := resource.MustParse(cpu)
	for _, p := range r.Prices {
		if want.Cmp(resource.MustParse(p.CPU)) == 0 {
			return p.RV
		}
	}
	return 0
}

// FirstCreated is the lowest resourceVersion of a pod's creation (0: none).
func (r GangRecord) FirstCreated() uint64 { return lowest(r.Created) }

// FirstBound is the lowest resourceVersion of a pod's binding (0: none).
func (r GangRecord) FirstBound() uint64 { return lowest(r.Bound) }

func lowest(m map[string]uint64) uint64 {
	first := uint64(0)
	for _, rv := range m {
		if first == 0 || rv < first {
			first = rv
		}
	}
	return first
}

// PodsAsk is the sum of the pods' effective requests (the KEP-753 rule, overhead included), as the
// schedulers count a gang's pods.
func PodsAsk(pods []corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range pods {
		for name, q := range resourcehelper.PodRequests(&pods[i], resourcehelper.PodResourcesOptions{}) {
			s := sum[name]
			s.Add(q)
			sum[name] = s
		}
	}
	return sum
}

// TrainJobCondition is the status, reason and lastTransitionTime of the TrainJob's condition of
// type typ ("", "", nil when it has none).
func TrainJobCondition(tj *unstructured.Unstructured, typ string) (status, reason string, at *time.Time) {
	conds, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		if ts, err := time.Parse(time.RFC3339, s); err == nil {
			at = &ts
		}
		return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), at
	}
	return "", "", nil
}
