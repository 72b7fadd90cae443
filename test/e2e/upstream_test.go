//go:build e2e

package e2e

// Volcano's and JobSet's own example manifests, applied as a new user would, in a namespace a
// WorkloadPolicy governs (queue, hyperbatch-scheduler, gang: true). Each ends Completed, or is refused
// with a message that says why. See docs/examples.md.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// upstreamVolcanoJobs are Volcano's example Jobs (volcano.sh/volcano v1.14.0-alpha.0, example/) this
// test runs, with what each must end in: "" for Completed, otherwise a text the refusal must contain.
// Left out, and why (docs/examples.md): job.yaml (its volumeClaim needs a dynamic volume provisioner,
// which the local cluster has not), hierarchical-jobs/ (needs its hierarchical queues and Volcano's
// capacity plugin with hierarchy), jobflow/ and integrations/argo/ (JobFlow and Argo Workflow, other
// controllers), task-start-dependency/ (Volcano's job controller creates a dependent task's pods
// only while the depended-on task's pods run with ready containers; kwok completes them at once, so
// the dependent task is never created: seen with job.yaml, nginx1 Succeeded, nginx2/3 never
// created, the Job Running), the GPU variants of examples that are here in their CPU form.
var upstreamVolcanoJobs = map[string]string{
	"job-plugin.yaml": "",
	"integrations/tensorflow/dist-mnist/tf-dist-mnist-example.yaml": "",
	"integrations/mpi/mpi-example.yaml":                             "",
	"integrations/ray/ray-example.yaml":                             "",
	"MindSpore-example/mindspore_cpu/mindspore-cpu.yaml":            "",
	"kubecon-2019-china/gang/mpi-example.yaml":                      "",
	"invalid_jobs/minAvailable-webhook-deny.yaml":                   "minAvailable",
	"invalid_jobs/duplicatedTaskName-webhook-deny.yaml":             "duplicated task name",
	"invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml":          "duplicate event",
}

func TestUpstreamExamples(t *testing.T) {
	e2efw.SkipUnlessSimulated(t, "the upstream examples run images from public registries (tensorflow, mpi-operator, ray, mindspore); no registry is reachable, and real nodes run only the images make images loads")
	ctx := context.Background()
	nodes := e2efw.Workload()
	// Several examples share a Job name (lm-mpi-job): each Volcano example gets its own namespace,
	// all governed by one policy; the JobSets share the first one.
	files := make([]string, 0, len(upstreamVolcanoJobs))
	for f := range upstreamVolcanoJobs {
		files = append(files, f)
	}
	sort.Strings(files)
	label := "examples-" + primary.Namespace(t)
	nss := make([]string, len(files))
	for i := range files {
		nss[i] = labelledNamespace(t, label)
	}
	ns := nss[0]
	requireVolcano(t, ns)
	startVolcanoScheduler(t)
	ensureQueue(t, "default")
	openQueue(t, label)
	policy := examplesPolicy(t, label, len(nss), hbv1.PolicyDefaults{Queue: label, SchedulerName: "hyperbatch-scheduler", Gang: ptr.To(true)})
	// Positive signal: the webhook has the policy.
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	applyUntilDefaulted(t, writeManifest(t, volcanoJobManifest(t, ns, "probe")), policy, probe)

	type pending struct {
		source string
		obj    client.Object
	}
	var started []pending

	dir := filepath.Join(volcanoModuleDir(t), "example")
	for i, file := range files {
		refusal := upstreamVolcanoJobs[file]
		raw, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		var job batchv1alpha1.Job
		require.NoError(t, yaml.Unmarshal(raw, &job), file)
		// The example as upstream wrote it, plus the run's node choice in every task's pod template.
		chosen := withNodeChoice(t, raw, nodes, file)
		out, err := primary.Kubectl("apply", "-n", nss[i], "-f", writeManifest(t, string(chosen)))
		if refusal != "" {
			if assert.Error(t, err, "volcano %s: must be refused", file) {
				assert.Contains(t, out, "denied the request", "volcano %s", file)
				assert.Contains(t, out, refusal, "volcano %s: the refusal must say why", file)
				t.Logf("volcano %s: refused: %s", file, strings.TrimSpace(out))
			}
			continue
		}
		if !assert.NoError(t, err, "volcano %s: %s", file, out) {
			continue
		}
		started = append(started, pending{"volcano " + file, &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i], Name: job.Name}}})
	}

	exs, err := builders.JobSetKEPExamples()
	require.NoError(t, err)
	names := map[string]int{}
	for _, ex := range exs {
		if ex.Err != nil {
			t.Logf("jobset %s: left out: not valid YAML upstream (%v)", ex.Source, ex.Err)
			continue
		}
		if v := claimVolume(ex.JobSet); v != "" {
			t.Logf("jobset %s: left out: mounts PersistentVolumeClaim %s (the local cluster has no volume provisioner)", ex.Source, v)
			continue
		}
		js := ex.JobSet.DeepCopy()
		js.Namespace = ns
		for k := range js.Spec.ReplicatedJobs {
			nodes.Apply(&js.Spec.ReplicatedJobs[k].Template.Spec.Template.Spec)
		}
		if names[js.Name]++; names[js.Name] > 1 {
			js.Name = fmt.Sprintf("%s-%d", js.Name, names[js.Name]) // KEP-672 uses one name twice
		}
		if err := c.Create(ctx, js); err != nil {
			assert.NotEmpty(t, err.Error(), "jobset %s refused without a message", ex.Source)
			t.Logf("jobset %s: refused: %v", ex.Source, err)
			continue
		}
		started = append(started, pending{"jobset " + ex.Source, &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: js.Name}}})
	}

	// Every started example ends Completed; a failure state ends the wait for it with its reason.
	done := map[string]string{}
	waitCtx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	_ = wait.PollUntilContextCancel(waitCtx, time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range started {
			if _, ok := done[p.source]; ok {
				continue
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(p.obj), p.obj); err != nil {
				continue
			}
			if end := endState(p.obj); end != "" {
				done[p.source] = end
			}
		}
		return len(done) == len(started), nil
	})
	for _, p := range started {
		end, ok := done[p.source]
		if !ok {
			end = "still running after 6 minutes: " + runState(p.obj)
		}
		assert.Equal(t, "Completed", end, "%s", p.source)
	}
	t.Logf("ended: %v", done)

	// The JobSets JobSet creates in stages are no gang, and say so.
	var events corev1.EventList
	require.NoError(t, c.List(ctx, &events, client.InNamespace(ns)))
	staged := map[string]string{}
	for _, e := range events.Items {
		if e.Reason == "GangNotPossible" {
			staged[e.InvolvedObject.Name] = e.Message
		}
	}
	for _, p := range started {
		js, ok := p.obj.(*jobsetv1alpha2.JobSet)
		if !ok {
			continue
		}
		if feature := defaults.JobSetStagedStart(js); feature != "" {
			assert.Contains(t, staged[js.Name], feature, "%s: GangNotPossible Event", p.source)
		} else {
			assert.NotContains(t, staged, js.Name, "%s is a gang", p.source)
		}
	}
}

// runState describes an object that has not ended.
func runState(obj client.Object) string {
	switch o := obj.(type) {
	case *batchv1alpha1.Job:
		return fmt.Sprintf("phase %q, %d pending, %d running, %d succeeded", o.Status.State.Phase, o.Status.Pending, o.Status.Running, o.Status.Succeeded)
	case *jobsetv1alpha2.JobSet:
		return fmt.Sprintf("replicatedJobsStatus %+v", o.Status.ReplicatedJobsStatus)
	}
	return ""
}

// labelledNamespace creates a namespace carrying label e2e-examples=value (deleted when the test ends).
func labelledNamespace(t *testing.T, value string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-", Labels: map[string]string{"e2e-examples": value}}}
	require.NoError(t, c.Create(context.Background(), ns))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// examplesPolicy creates a WorkloadPolicy governing the n namespaces labelled e2e-examples=value and
// waits until the manager has observed it matching all of them.
func examplesPolicy(t *testing.T, value string, n int, d hbv1.PolicyDefaults) string {
	t.Helper()
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: value}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-examples": value}},
		Defaults:          d,
	}}
	require.NoError(t, c.Create(context.Background(), p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	e2efw.Poll(t, 30*time.Second, "the manager to observe the policy", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.MatchingNamespaces == int32(n), nil
	})
	return p.Name
}

// endState is "Completed", a failure state with its reason, or "" while the object runs.
func endState(obj client.Object) string {
	switch o := obj.(type) {
	case *batchv1alpha1.Job:
		switch ph := o.Status.State.Phase; ph {
		case batchv1alpha1.Completed:
			return "Completed"
		case batchv1alpha1.Failed, batchv1alpha1.Aborted, batchv1alpha1.Terminated:
			return fmt.Sprintf("%s: %s %s", ph, o.Status.State.Reason, o.Status.State.Message)
		}
	case *jobsetv1alpha2.JobSet:
		for _, cond := range o.Status.Conditions {
			if cond.Status != metav1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case string(jobsetv1alpha2.JobSetCompleted):
				return "Completed"
			case string(jobsetv1alpha2.JobSetFailed):
				return "Failed: " + cond.Message
			}
		}
	}
	return ""
}

// claimVolume names a PersistentVolumeClaim a JobSet's pods mount, or one its controller creates for
// them from spec.volumeClaimPolicies (JobSet v0.11.0, KEP-572) ("" when none).
func claimVolume(js *jobsetv1alpha2.JobSet) string {
	for _, p := range js.Spec.VolumeClaimPolicies {
		if len(p.Templates) > 0 {
			return p.Templates[0].Name
		}
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		for _, v := range rj.Template.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	return ""
}

// JobSet's exclusive placement works in the local cluster (JobSet's pod webhooks are registered, as
// in a user's cluster): each Job's pods share one leaf and no two Jobs share a leaf. Under a gang
// default the JobSet is no gang (JobSet holds each follower pod back until its leader is scheduled)
// and says so; it ends Completed.
func TestJobSetExclusivePlacement(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	queue := "examples-" + ns
	openQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{Queue: queue, SchedulerName: "hyperbatch-scheduler", Gang: ptr.To(true)})
	nodes := e2efw.Workload()
	manifest := writeManifest(t, fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: exclusive
  namespace: %s
  annotations:
    alpha.jobset.sigs.k8s.io/exclusive-topology: topology.hyperbatch.dev/leaf
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          spec:
            restartPolicy: Never
%s            containers:
            - name: w
              image: %s
              resources: {requests: {cpu: 100m, memory: 64Mi}}
`, ns, nodes.PodSpecYAML(12), nodes.Image))
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exclusive"}}
	applyUntilDefaulted(t, manifest, policy, js)

	leafOfNode := leafOf(t)
	leaves := map[string]map[string]bool{} // Job → leaves of its pods
	e2efw.Poll(t, 3*time.Minute, "the exclusive JobSet's 4 pods to be bound", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: "exclusive"}); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			job := p.Labels["job-name"]
			if leaves[job] == nil {
				leaves[job] = map[string]bool{}
			}
			leaves[job][leafOfNode[p.Spec.NodeName]] = true
		}
		return bound >= 4, nil
	})
	seen := map[string]string{}
	for job, ls := range leaves {
		assert.Len(t, ls, 1, "Job %s's pods span leaves %v", job, ls)
		for l := range ls {
			assert.NotContains(t, seen, l, "Jobs %s and %s share leaf %s", job, seen[l], l)
			seen[l] = job
		}
	}
	var events corev1.EventList
	require.NoError(t, c.List(ctx, &events, client.InNamespace(ns)))
	var msg string
	for _, e := range events.Items {
		if e.Reason == "GangNotPossible" && e.InvolvedObject.Name == "exclusive" {
			msg = e.Message
		}
	}
	assert.Contains(t, msg, "exclusive placement", "GangNotPossible Event")
	e2efw.Poll(t, 3*time.Minute, "the exclusive JobSet to end", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
			return false, err
		}
		return endState(js) != "", nil
	})
	assert.Equal(t, "Completed", endState(js))
}

// withNodeChoice is a Volcano Job manifest with the node choice's selector and tolerations added to
// every task's pod template, every other field kept as written (edited as untyped YAML).
func withNodeChoice(t *testing.T, raw []byte, nodes e2efw.Nodes, source string) []byte {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &obj), source)
	var sel corev1.PodSpec
	nodes.Apply(&sel)
	spec, _ := obj["spec"].(map[string]any)
	tasks, _ := spec["tasks"].([]any)
	for _, task := range tasks {
		tm, _ := task.(map[string]any)
		tmpl, _ := tm["template"].(map[string]any)
		ps, _ := tmpl["spec"].(map[string]any)
		require.NotNil(t, ps, "%s: a task without template.spec", source)
		if len(sel.NodeSelector) > 0 {
			ns, _ := ps["nodeSelector"].(map[string]any)
			if ns == nil {
				ns = map[string]any{}
			}
			for k, v := range sel.NodeSelector {
				ns[k] = v
			}
			ps["nodeSelector"] = ns
		}
		if len(sel.Tolerations) > 0 {
			tols, _ := ps["tolerations"].([]any)
			for _, tol := range sel.Tolerations {
				b, err := json.Marshal(tol)
				require.NoError(t, err)
				var m map[string]any
				require.NoError(t, json.Unmarshal(b, &m))
				tols = append(tols, m)
			}
			ps["tolerations"] = tols
		}
	}
	out, err := yaml.Marshal(obj)
	require.NoError(t, err, source)
	return out
}
