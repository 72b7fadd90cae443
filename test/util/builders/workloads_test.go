package builders

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The manifests the builders write hold exactly the fields of the hand-written YAML the e2e suite
// applied before (nothing more: no zero values the apiserver or a webhook would take as set).
func TestManifestsMatchTheHandWrittenYAML(t *testing.T) {
	same := func(t *testing.T, got, want string) {
		t.Helper()
		var g, w map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(got), &g))
		require.NoError(t, yaml.Unmarshal([]byte(want), &w))
		assert.Equal(t, scalarsAsStrings(w), scalarsAsStrings(g), "manifest:\n%s", got)
	}
	t.Run("VolcanoJob", func(t *testing.T) {
		task := func(n string) corev1.PodTemplateSpec {
			return MakePodTemplate(n, "registry.k8s.io/pause:3.10").NodeSelector("type", "kwok").
				Request(corev1.ResourceCPU, "100m").Request(corev1.ResourceMemory, "64Mi").Obj()
		}
		got, err := MakeVolcanoJob("ns", "train").MinAvailable(9).Task("master", 1, task("master")).Task("worker", 8, task("worker")).Manifest()
		require.NoError(t, err)
		same(t, got, `apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: train
  namespace: ns
spec:
  minAvailable: 9
  tasks:
  - name: master
    replicas: 1
    template:
      spec:
        restartPolicy: Never
        nodeSelector: {type: kwok}
        containers:
        - name: master
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: 100m, memory: 64Mi}}
  - name: worker
    replicas: 8
    template:
      spec:
        restartPolicy: Never
        nodeSelector: {type: kwok}
        containers:
        - name: worker
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: 100m, memory: 64Mi}}
`)
	})
	t.Run("JobSet", func(t *testing.T) {
		tmpl := MakePodTemplate("trainer", "registry.k8s.io/pause:3.10").Scheduler("hyperbatch-scheduler").NodeSelector("type", "kwok").
			Request(corev1.ResourceCPU, "500m").Request(corev1.ResourceMemory, "1Gi").Request(GPU, "2").Limit(GPU, "2").Obj()
		got, err := MakeJobSet("ns", "gang").Annotation("hyperbatch.dev/queue", "q").Annotation("x", "33").
			ReplicatedJob("workers", 4, 8, tmpl).Manifest()
		require.NoError(t, err)
		same(t, got, `apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: gang
  namespace: ns
  annotations:
    hyperbatch.dev/queue: q
    x: "33"
spec:
  replicatedJobs:
  - name: workers
    replicas: 4
    template:
      spec:
        parallelism: 8
        completions: 8
        backoffLimit: 0
        template:
          spec:
            schedulerName: hyperbatch-scheduler
            restartPolicy: Never
            nodeSelector: {type: kwok}
            containers:
            - name: trainer
              image: registry.k8s.io/pause:3.10
              resources:
                requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: 2}
                limits: {nvidia.com/gpu: 2}
`)
	})
}

// scalarsAsStrings writes numbers as strings (a quantity is 2 or "2" alike).
func scalarsAsStrings(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = scalarsAsStrings(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = scalarsAsStrings(e)
		}
		return out
	case float64, int, int64:
		return fmt.Sprint(x)
	}
	return v
}
