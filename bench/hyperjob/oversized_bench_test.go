package hyperjob

import (
	"context"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
)

// BenchmarkRefuseOversized submits what a tenant could (3 replicatedJobs × 100,000 replicas, with no
// webhook in front) and measures what the manager spends refusing it: its API writes (target: the
// status condition only), the objects it creates (target 0), and the bytes the process allocates
// and keeps, next to the same figures for a one-child HyperJob in the same run (the ratio is the
// target: memory flat whatever a tenant submits).
func BenchmarkRefuseOversized(b *testing.B) {
	for n := 0; n < b.N; n++ {
		ctx := context.Background()
		_, counter := startManager(b, "oversized", -1, 0)
		submit := func(name string, replicas ...int32) (allocMiB, heapMiB float64, writes int64) {
			hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "oversized"}}
			for i, r := range replicas {
				hj.Spec.ReplicatedJobs = append(hj.Spec.ReplicatedJobs, trainingv1alpha1.ReplicatedJob{
					Name: string(rune('a' + i)), Replicas: r, ClusterNames: []string{"member-1"},
					TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 1,
						Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer:1"}}}}}}},
				})
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			w0, _ := counter.snapshot()
			if err := env.Client.Create(ctx, hj); err != nil {
				b.Fatal(err)
			}
			waitUntil(b, 2*time.Minute, func(ctx context.Context) (bool, error) {
				var cur trainingv1alpha1.HyperJob
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
					return false, err
				}
				if cur.Status.ObservedGeneration != cur.Generation || cur.Status.SplitCount == nil {
					return false, nil
				}
				refused := apimeta.IsStatusConditionTrue(cur.Status.Conditions, hyperjob.ConditionSpecInvalid)
				return refused || int(*cur.Status.SplitCount) == len(cur.Status.ReplicatedJobsStatus[0].JobStates), nil
			})
			runtime.ReadMemStats(&after)
			runtime.GC()
			var kept runtime.MemStats
			runtime.ReadMemStats(&kept)
			w1, _ := counter.snapshot()
			return float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20), (float64(kept.HeapAlloc) - float64(before.HeapAlloc)) / (1 << 20), w1 - w0
		}
		oneAlloc, oneHeap, oneWrites := submit("one", 1)
		bigAlloc, bigHeap, bigWrites := submit("huge", 100000, 100000, 100000)
		jobs, pps, err := count(ctx, "oversized")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(bigAlloc, "MiB-alloc/refuse")
		b.ReportMetric(bigAlloc/oneAlloc, "alloc-ratio/refuse-vs-1child")
		b.ReportMetric(bigHeap, "MiB-heap-kept/refuse")
		b.ReportMetric(float64(bigWrites), "writes/refuse")
		b.ReportMetric(float64(jobs+pps-2), "children-created/refuse")
		b.Logf("1 child: %.2f MiB allocated, %+.2f MiB heap kept, %d writes; 3 × 100,000 refused: %.2f MiB allocated, %+.2f MiB heap kept, %d writes; children in the namespace: %d jobs, %d policies (the one-child HyperJob's)",
			oneAlloc, oneHeap, oneWrites, bigAlloc, bigHeap, bigWrites, jobs, pps)
	}
}
