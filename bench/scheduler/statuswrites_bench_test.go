package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// swNodes is the cluster of BenchmarkPlacementUnderStatusWrites (the throughput bench's tree).
const swNodes = 1000

// BenchmarkPlacementUnderStatusWrites measures what PodGroup status writes cost the scheduler
// plugin. Volcano's PodGroup CRD has no status subresource, so every status write (phase, counts,
// conditions: Volcano's controllers and hyperbatch's podgroupstatus controller write them while a
// gang is scheduled) bumps metadata.generation. The same workload as BenchmarkSchedulingThroughput
// (36 gangs of 8, 32 and 128 pods, 2,016 pods) runs twice on one hyperbatch-scheduler, 1,000 nodes:
//   - quiet: nothing writes the PodGroups;
//   - status-writes: a status writer (writeStatusUntil) writes a PodGroup's status after each event
//     of one of its pods, as a PodGroup status controller does, while the pods are created and
//     scheduled.
//
// It reports, for each, pods/s and the plugin's gang domain choices per gang
// (hyperbatch_scheduler_gang_domain_choices_total; about 1 when a placement survives), the status
// writes made, and the ratios status-writes/quiet. Use -benchtime=1x.
func BenchmarkPlacementUnderStatusWrites(b *testing.B) {
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "kube-apiserver")); err != nil {
		b.Skip("no control-plane binaries; set KUBEBUILDER_ASSETS")
	}
	ctrllog.SetLogger(klog.NewKlogr())
	dir := b.TempDir()
	quietKlog(b, dir)
	b.StopTimer()
	env, cs := startControlPlane(b)
	setupCluster(b, cs, env, swNodes)
	ctx, cancel := context.WithCancel(context.Background())
	done := startBenchScheduler(b, ctx, env.Config, dir, hbName)
	defer func() {
		cancel()
		<-done
		configz.Delete("componentconfig")
	}()
	probe(b, cs, env, hbName)
	var quiet, writes swResult
	for i := 0; i < b.N; i++ {
		quiet.add(runStatusWorkload(b, cs, env, false))
		writes.add(runStatusWorkload(b, cs, env, true))
	}
	for _, r := range []struct {
		name string
		res  swResult
	}{{"quiet", quiet}, {"status-writes", writes}} {
		b.ReportMetric(r.res.podsPerSec(), r.name+"-pods/s")
		b.ReportMetric(r.res.choicesPerGang(), r.name+"-choices/gang")
		b.Logf("%-13s %5d pods %6.1fs %6.1f pods/s  %5.2f domain choices/gang  %6d status writes", r.name, r.res.pods, r.res.elapsed.Seconds(),
			r.res.podsPerSec(), r.res.choicesPerGang(), r.res.statusWrites)
	}
	b.ReportMetric(float64(writes.statusWrites), "status-writes")
	b.ReportMetric(writes.podsPerSec()/quiet.podsPerSec(), "pods/s-ratio")
	b.ReportMetric(writes.choicesPerGang()/quiet.choicesPerGang(), "choices-ratio")
}

type swResult struct {
	pods, gangs, statusWrites int
	choices                   float64
	elapsed                   time.Duration
}

func (r *swResult) add(o swResult) {
	r.pods += o.pods
	r.gangs += o.gangs
	r.statusWrites += o.statusWrites
	r.choices += o.choices
	r.elapsed += o.elapsed
}

func (r swResult) podsPerSec() float64     { return float64(r.pods) / r.elapsed.Seconds() }
func (r swResult) choicesPerGang() float64 { return r.choices / float64(r.gangs) }

// runStatusWorkload runs the throughput workload in a new namespace, with or without the status
// writer, and counts the plugin's domain choices made meanwhile.
func runStatusWorkload(b *testing.B, cs kubernetes.Interface, env *framework.Env, statusWrites bool) swResult {
	ctx := context.Background()
	ns := newNamespace(b, cs, "sw")
	gangs := tpWorkload()
	total := 0
	for _, g := range gangs {
		if err := env.Client.Create(ctx, podGroup(ns, g.name, g.size)); err != nil {
			b.Fatal(err)
		}
		total += g.size
	}
	choices0 := domainChoices(b)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written int
	if statusWrites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			written = writeStatusUntil(ctx, cs, env, ns, stop)
		}()
	}
	b.StartTimer()
	start := time.Now()
	bound := make(chan error, 1)
	go func() { bound <- waitBound(ctx, cs, ns, total, 5*time.Minute) }()
	framework.Parallel(b, tpCreators, total, func(i int) error {
		g, k := gangOf(gangs, i)
		_, err := cs.CoreV1().Pods(ns).Create(ctx, gangPod(ns, fmt.Sprintf("%s-%03d", g.name, k), g.name, hbName), metav1.CreateOptions{})
		return err
	})
	err := <-bound
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatalf("%s: pods not all bound after %v: %v", ns, elapsed.Round(time.Second), err)
	}
	res := swResult{pods: total, gangs: len(gangs), statusWrites: written, choices: domainChoices(b) - choices0, elapsed: elapsed}
	deletePods(b, cs, ns)
	return res
}

// gangOf maps the i-th pod of the workload to its gang and its index in the gang.
func gangOf(gangs []tpGang, i int) (tpGang, int) {
	for _, g := range gangs {
		if i < g.size {
			return g, i
		}
		i -= g.size
	}
	panic("pod index out of range")
}

// writeStatusUntil plays a PodGroup status controller (Volcano's, or hyperbatch's podgroupstatus)
// until stop is closed: it watches the pods of ns and, after each pod event, writes the status of
// that pod's PodGroup (pods bound so far, a condition whose time changes), coalescing events that
// arrive while it writes. Each write is a full update (the CRD has no status subresource) and bumps
// the generation, like the real writers'.
func writeStatusUntil(ctx context.Context, cs kubernetes.Interface, env *framework.Env, ns string, stop <-chan struct{}) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	defer w.Stop()
	var mu sync.Mutex
	dirty := map[string]bool{}
	bound := map[string]map[string]bool{}
	wake := make(chan struct{}, 1)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			g := p.Annotations[gang.GroupNameAnnotation]
			mu.Lock()
			if bound[g] == nil {
				bound[g] = map[string]bool{}
			}
			if p.Spec.NodeName != "" {
				bound[g][p.Name] = true
			}
			dirty[g] = true
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	n := 0
	for {
		select {
		case <-stop:
			return n
		case <-wake:
		}
		mu.Lock()
		todo := make(map[string]int32, len(dirty))
		for g := range dirty {
			todo[g] = int32(len(bound[g]))
		}
		dirty = map[string]bool{}
		mu.Unlock()
		for g, running := range todo {
			var pg schedulingv1beta1.PodGroup
			if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: g}, &pg) != nil {
				continue
			}
			pg.Status.Phase = schedulingv1beta1.PodGroupInqueue
			pg.Status.Running = running
			pg.Status.Conditions = []schedulingv1beta1.PodGroupCondition{{Type: schedulingv1beta1.PodGroupScheduled, Status: corev1.ConditionFalse,
				TransitionID: fmt.Sprint(n), LastTransitionTime: metav1.Now(), Reason: "BenchStatusWrite", Message: fmt.Sprintf("%d pods bound", running)}}
			if env.Client.Update(ctx, &pg) == nil {
				n++
			}
		}
	}
}

// domainChoices reads the plugin's hyperbatch_scheduler_gang_domain_choices_total (the scheduler
// runs in this process).
func domainChoices(b *testing.B) float64 {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hyperbatch_scheduler_gang_domain_choices_total" {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	b.Fatal("metric hyperbatch_scheduler_gang_domain_choices_total not registered")
	return 0
}
