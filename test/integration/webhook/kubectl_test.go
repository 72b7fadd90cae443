package webhook

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// applyManifest has one object of every kind and names none of the fields the policy defaults.
const applyManifest = `apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vcjob, namespace: apply-a}
spec:
  minAvailable: 1
  tasks:
  - name: w
    replicas: 1
    template:
      spec:
        restartPolicy: Never
        containers: [{name: c, image: registry.example/trainer:v1}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg, namespace: apply-a}
spec: {minMember: 2}
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: apply-a}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: registry.example/trainer:v1}]
---
apiVersion: training.volcano.sh/v1alpha1
kind: HyperJob
metadata: {name: hj, namespace: apply-a}
spec:
  replicatedJobs:
  - name: trainer
    replicas: 2
    templateSpec:
      minAvailable: 1
      tasks:
      - name: w
        replicas: 1
        template:
          spec:
            restartPolicy: Never
            containers: [{name: c, image: registry.example/trainer:v1}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: pp, namespace: apply-a}
spec:
  resourceSelectors:
  - {apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: vcjob}
---
apiVersion: v1
kind: Pod
metadata: {name: pod, namespace: apply-a}
spec:
  restartPolicy: Never
  containers: [{name: c, image: registry.example/trainer:v1}]
`

// kubectl apply of the same manifest, twice client-side and then twice server-side, keeps every
// default, and kubectl diff finds nothing to change in either mode.
//
// Why this holds: the apiserver computes managedFields before mutating admission runs, so the
// fields the webhook fills are owned by no manager. A client-side apply only deletes what its
// last-applied-configuration held, and a server-side apply only what its own manager owned, so
// neither removes them; where an apply replaces a whole list (client-side apply's JSON merge patch
// replaces JobSet and HyperJob replicatedJobs), the UPDATE webhook carries the old values over. No
// --force-conflicts is needed: no applied field has a different owner with a different value
// (switching to --server-side, kubectl moves the client-side apply's fields to its own manager).
func TestKubectlApplyTwice(t *testing.T) {
	createNamespace(t, "apply-a", map[string]string{"team": "a", "hyperbatch.dev/pod-webhook": "enabled"}, nil)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "workloads.yaml")
	if err := os.WriteFile(manifest, []byte(applyManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(framework.RepoRoot(), "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("the project's kubectl is missing (run 'make test-tools'): %v", err)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECTL_EXTERNAL_DIFF=diff -u")
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return string(out), code
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, code := run(args...)
		if code != 0 {
			t.Fatalf("kubectl %s exited %d:\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}

	steps := []struct {
		name string
		args []string
		diff []string
	}{
		{"client-side apply #1", []string{"apply", "-f", manifest}, nil},
		{"client-side apply #2", []string{"apply", "-f", manifest}, []string{"diff", "-f", manifest}},
		{"server-side apply #1", []string{"apply", "--server-side", "-f", manifest}, nil},
		{"server-side apply #2", []string{"apply", "--server-side", "-f", manifest},
			[]string{"diff", "--server-side", "-f", manifest}},
	}
	var first map[string]int64
	for _, s := range steps {
		out := mustRun(s.args...)
		if s.name == "client-side apply #1" {
			wantContains(t, "first apply's output", out, "Warning: hyperbatch: defaulted spec.queue=team-a")
		} else if strings.Contains(out, "Warning:") {
			t.Errorf("%s: warnings on a re-apply of an unchanged manifest:\n%s", s.name, out)
		}
		gens := checkApplied(t, s.name)
		if first == nil {
			first = gens
		}
		for n, g := range gens {
			if g != first[n] {
				t.Errorf("%s: %s went from generation %d to %d: the re-apply changed its spec", s.name, n, first[n], g)
			}
		}
		if s.diff != nil {
			if out, code := run(s.diff...); code != 0 {
				t.Errorf("%s: kubectl %s exited %d, want 0 (no difference):\n%s", s.name, strings.Join(s.diff, " "), code, out)
			}
		}
	}
	diffDetects(t, run, dir)
}

// diffDetects guards the assertions above: kubectl diff does report a real change (exit 1).
func diffDetects(t *testing.T, run func(args ...string) (string, int), dir string) {
	t.Helper()
	changed := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(changed, []byte(strings.Replace(applyManifest, "spec: {minMember: 2}", "spec: {minMember: 3}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"diff", "-f", changed}, {"diff", "--server-side", "-f", changed}} {
		if out, code := run(args...); code != 1 || !strings.Contains(out, "minMember: 3") {
			t.Errorf("kubectl %s exited %d, want 1 with the change:\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// checkApplied asserts every object of applyManifest still carries its defaults and returns their
// generations.
func checkApplied(t *testing.T, step string) map[string]int64 {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	c := env.Client
	key := func(n string) client.ObjectKey { return client.ObjectKey{Namespace: "apply-a", Name: n} }
	var job batchv1alpha1.Job
	var pg schedulingv1beta1.PodGroup
	var js jobsetv1alpha2.JobSet
	var hj trainingv1alpha1.HyperJob
	var pp policyv1alpha1.PropagationPolicy
	var pod corev1.Pod
	gens := map[string]int64{}
	for n, o := range map[string]client.Object{"vcjob": &job, "pg": &pg, "js": &js, "hj": &hj, "pp": &pp, "pod": &pod} {
		if err := c.Get(ctx, key(n), o); err != nil {
			t.Fatalf("%s: get %s: %v", step, n, err)
		}
		gens[n] = o.GetGeneration()
	}
	pt := js.Spec.ReplicatedJobs[0].Template.Spec.Template
	ts := hj.Spec.ReplicatedJobs[0].TemplateSpec
	for what, ok := range map[string]bool{
		"Volcano Job queue/class/TTL":     job.Spec.Queue == "team-a" && job.Spec.PriorityClassName == "batch-normal" && job.Spec.TTLSecondsAfterFinished != nil,
		"Volcano Job defaulted-by":        job.Annotations[hbv1.DefaultedByAnnotation] == allTeamA,
		"PodGroup queue/topology":         pg.Spec.Queue == "team-a" && pg.Spec.NetworkTopology != nil,
		"JobSet queue annotation":         js.Annotations[defaults.QueueNameAnnotation] == "team-a",
		"JobSet pod template defaults":    pt.Annotations[defaults.QueueNameAnnotation] == "team-a" && pt.Spec.PriorityClassName == "batch-normal" && pt.Spec.SchedulerName == "hyperbatch-scheduler",
		"HyperJob template defaults":      ts.Queue == "team-a" && ts.PriorityClassName == "batch-normal" && ts.NetworkTopology != nil,
		"HyperJob lifecycle annotations":  hj.Annotations[hbv1.TTLSecondsAfterFinishedAnnotation] == "86400" && hj.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] == "604800",
		"PropagationPolicy placement":     pp.Spec.Placement.ClusterAffinity != nil && len(pp.Spec.Placement.SpreadConstraints) == 1 && pp.Spec.PropagateDeps,
		"Pod scheduler/class/queue":       pod.Spec.SchedulerName == "hyperbatch-scheduler" && pod.Spec.PriorityClassName == "batch-normal" && pod.Annotations[defaults.QueueNameAnnotation] == "team-a",
		"Pod priority from PriorityClass": pod.Spec.Priority != nil && *pod.Spec.Priority == 1000,
	} {
		if !ok {
			t.Errorf("%s: %s lost", step, what)
		}
	}
	return gens
}
