package hyperjob

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

const gpu = string(builders.GPU)

func newNamespace(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

func replicatedJob(name string, replicas int32, clusters ...string) trainingv1alpha1.ReplicatedJob {
	return builders.MakeReplicatedJob(name, replicas).Clusters(clusters...).Obj()
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), obj), "creating %T %s", obj, obj.GetName())
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	framework.Eventually(t, timeout, what, cond)
}

// children lists the Volcano Jobs and PropagationPolicies labelled as children of the HyperJob.
func children(ctx context.Context, ns, hj string) (map[string]*batchv1alpha1.Job, map[string]*policyv1alpha1.PropagationPolicy, error) {
	sel := client.MatchingLabels{hbv1.HyperJobNameLabel: hj}
	var jl batchv1alpha1.JobList
	if err := env.Client.List(ctx, &jl, client.InNamespace(ns), sel); err != nil {
		return nil, nil, err
	}
	var pl policyv1alpha1.PropagationPolicyList
	if err := env.Client.List(ctx, &pl, client.InNamespace(ns), sel); err != nil {
		return nil, nil, err
	}
	jobs := map[string]*batchv1alpha1.Job{}
	for i := range jl.Items {
		jobs[jl.Items[i].Name] = &jl.Items[i]
	}
	pps := map[string]*policyv1alpha1.PropagationPolicy{}
	for i := range pl.Items {
		pps[pl.Items[i].Name] = &pl.Items[i]
	}
	return jobs, pps, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func names(hj, rj string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%s-%d", hj, rj, i)
	}
	return out
}

// waitForChildren waits until exactly want (sorted) Volcano Jobs and PropagationPolicies exist,
// none of them being deleted.
func waitForChildren(t *testing.T, timeout time.Duration, ns, hj string, want []string) (map[string]*batchv1alpha1.Job, map[string]*policyv1alpha1.PropagationPolicy) {
	t.Helper()
	want = slices.Clone(want)
	sort.Strings(want)
	var jobs map[string]*batchv1alpha1.Job
	var pps map[string]*policyv1alpha1.PropagationPolicy
	waitFor(t, timeout, fmt.Sprintf("children %s", short(want)), func(ctx context.Context) (bool, error) {
		var err error
		if jobs, pps, err = children(ctx, ns, hj); err != nil {
			return false, err
		}
		for _, j := range jobs {
			if j.DeletionTimestamp != nil {
				return false, fmt.Errorf("job %s is being deleted", j.Name)
			}
		}
		gj, gp := keys(jobs), keys(pps)
		if !slices.Equal(gj, want) || !slices.Equal(gp, want) {
			return false, fmt.Errorf("have jobs %s, policies %s", short(gj), short(gp))
		}
		return true, nil
	})
	return jobs, pps
}

func short(s []string) string {
	if len(s) > 8 {
		return fmt.Sprintf("%v … (%d)", s[:8], len(s))
	}
	return fmt.Sprint(s)
}

func getHyperJob(ctx context.Context, ns, name string) (*trainingv1alpha1.HyperJob, error) {
	var hj trainingv1alpha1.HyperJob
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &hj)
	return &hj, err
}

func updateHyperJob(t *testing.T, ns, name string, mutate func(*trainingv1alpha1.HyperJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		hj, err := getHyperJob(context.Background(), ns, name)
		if err != nil {
			return err
		}
		mutate(hj)
		return env.Client.Update(context.Background(), hj)
	})
	if err != nil {
		t.Fatalf("updating HyperJob %s: %v", name, err)
	}
}

// setJobStatus plays the Volcano controller: it writes a child's status.
func setJobStatus(t *testing.T, ns, name string, phase batchv1alpha1.JobPhase, mutate func(*batchv1alpha1.JobStatus)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j batchv1alpha1.Job
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
			return err
		}
		j.Status.State = batchv1alpha1.JobState{Phase: phase, Reason: "Test", LastTransitionTime: metav1.Now()}
		if mutate != nil {
			mutate(&j.Status)
		}
		return env.Client.Status().Update(context.Background(), &j)
	})
	if err != nil {
		t.Fatalf("writing status of Volcano Job %s: %v", name, err)
	}
}

// eventsFor returns the Events about the HyperJob with the reason.
func eventsFor(ctx context.Context, ns, hj, reason string) ([]corev1.Event, error) {
	return framework.EventsAbout(ctx, env.Client, ns, "HyperJob", hj, reason)
}

func waitForEvent(t *testing.T, ns, hj, reason, contains string) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("event %s containing %q", reason, contains), func(ctx context.Context) (bool, error) {
		evs, err := eventsFor(ctx, ns, hj, reason)
		for _, e := range evs {
			if strings.Contains(e.Message, contains) {
				return true, nil
			}
		}
		return false, err
	})
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func equalJSON(a, b any) bool { return toJSON(a) == toJSON(b) }

// watchDisruption watches the namespace's Volcano Jobs and tracks how many of names are absent or
// terminating at once. The returned function stops the watch and reports the maximum and the number
// of events seen after the initial replay.
func watchDisruption(t *testing.T, ns string, names []string) func() (int, int) {
	t.Helper()
	wc, err := client.NewWithWatch(testConfig(), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &batchv1alpha1.JobList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	live := map[string]bool{} // name → exists and not terminating
	var mu sync.Mutex
	maxDisrupted, events, replayed := 0, 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1alpha1.Job)
			if !ok || !slices.Contains(names, j.Name) {
				continue
			}
			mu.Lock()
			switch ev.Type {
			case watch.Deleted:
				delete(live, j.Name)
			default:
				live[j.Name] = j.DeletionTimestamp == nil
			}
			if replayed < len(names) {
				replayed++ // the initial ADDED events
			} else {
				events++
			}
			if replayed == len(names) {
				d := 0
				for _, n := range names {
					if !live[n] {
						d++
					}
				}
				maxDisrupted = max(maxDisrupted, d)
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() (int, int) {
		once.Do(func() { w.Stop(); cancel(); <-done })
		mu.Lock()
		defer mu.Unlock()
		return maxDisrupted, events
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitForFullReconcile is the positive signal a "nothing else happens" check waits for: it sets the
// HyperJob's spec.minAvailable to minAvailable (pass the value already in effect, the number of
// children, so the change alters nothing else) and waits until status.observedGeneration reaches
// the new generation. The controller writes status last, so by then it has run a whole reconcile
// (children synced) after everything the test did before this call.
func waitForFullReconcile(t *testing.T, ns, name string, minAvailable int32) {
	t.Helper()
	updateHyperJob(t, ns, name, func(hj *trainingv1alpha1.HyperJob) { hj.Spec.MinAvailable = &minAvailable })
	hj, err := getHyperJob(context.Background(), ns, name)
	require.NoError(t, err)
	generation := hj.Generation
	waitFor(t, timeout, fmt.Sprintf("observedGeneration %d of HyperJob %s", generation, name), func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, name)
		return err == nil && hj.Status.ObservedGeneration >= generation, err
	})
}
