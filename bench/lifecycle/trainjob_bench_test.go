package lifecycle

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// installTrainJobCRD installs Kubeflow Trainer's CRDs (make crds gathers them from the pinned module)
// before the manager starts: its lifecycle controller serves TrainJobs only when their CRD exists.
func installTrainJobCRD(b *testing.B) {
	dir := filepath.Join(framework.RepoRoot(), "_output", "crds", "trainer")
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		b.Fatalf("installing Trainer's CRDs from %s (run make crds): %v", dir, err)
	}
}

// BenchmarkTrainJobTTLDeletions is BenchmarkTTLDeletions for TrainJobs (Trainer v2.3.0's CRD; no
// Trainer controller runs: the benchmark writes each TrainJob's Complete condition, as the HyperJob
// benchmark writes Completed, so the due times are exact). LIFECYCLE_BENCH_TTL sets N.
func BenchmarkTrainJobTTLDeletions(b *testing.B) {
	installTrainJobCRD(b)
	runTTLDeletions(b, ttlKind{plural: "TrainJobs", prefix: "tj", proto: defaults.NewTrainJob(),
		build: func(ns, name string, ttl int) client.Object {
			tj := defaults.NewTrainJob()
			tj.SetNamespace(ns)
			tj.SetName(name)
			tj.SetAnnotations(map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: strconv.Itoa(ttl)})
			tj.Object["spec"] = map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed"}}
			return tj
		},
		finish: func(obj client.Object, at time.Time) {
			obj.(*unstructured.Unstructured).Object["status"] = map[string]any{"conditions": []any{map[string]any{
				"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "benchmark",
				"lastTransitionTime": at.UTC().Format(time.RFC3339)}}}
		}})
}
