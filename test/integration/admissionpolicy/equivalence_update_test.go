package admissionpolicy

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// update applies edit to the stored Pod ns/name and updates it.
func update(t *testing.T, c client.Client, w *framework.Warnings, ns, name string, edit func(*corev1.Pod)) outcome {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	var pod corev1.Pod
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod))
	edit(&pod)
	w.Take()
	err := c.Update(ctx, &pod)
	return result(t, c, w, ns, &pod, err)
}

// TestEquivalentPodUpdates holds the UPDATE carry-over and the UPDATE checks of policy mode to the
// webhook's: a request that drops a default gets it back, a blanked defaulted-by annotation comes
// back, an unchanged queue is not judged again, a changed one is.
func TestEquivalentPodUpdates(t *testing.T) {
	c, w := warningClient(t)
	q, mode, tier := defaults.QueueNameAnnotation, defaults.NetworkTopologyModeAnnotation, defaults.NetworkTopologyHighestTierAnnotation
	drop := func(keys ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for _, k := range keys {
				delete(p.Annotations, k)
			}
		}
	}
	set := func(kv ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := 0; i < len(kv); i += 2 {
				p.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	cases := map[string]func(*corev1.Pod){
		"drop-queue":            drop(q),
		"blank-queue":           set(q, " "),
		"drop-topology":         drop(mode, tier),
		"drop-tier":             drop(tier),
		"drop-defaulted-by":     drop(hbv1.DefaultedByAnnotation),
		"blank-defaulted-by":    set(hbv1.DefaultedByAnnotation, ""),
		"drop-all":              drop(q, mode, tier, hbv1.DefaultedByAnnotation),
		"queue-changed-refused": set(q, "gpu"),
		"queue-changed-allowed": set(q, "shared"),
		"queue-spaces":          set(q, " shared"),
		"scheduler-reset":       func(p *corev1.Pod) { p.Spec.SchedulerName = corev1.DefaultSchedulerName },
		"label-only":            func(p *corev1.Pod) { p.Labels = map[string]string{"x": "y"} },
	}
	profs := map[string]pair{
		"team-a": profile(t, "upd-team-a", map[string]string{"team": "a"}, nil),
		"soft":   profile(t, "upd-soft", map[string]string{"team": "soft"}, nil),
		"none":   profile(t, "upd-none", nil, nil),
	}
	// Pods created before the namespace's policy filled anything: an UPDATE introduces nothing.
	starts := map[string]*corev1.Pod{"bare": bare(""), "pinned": func() *corev1.Pod {
		p := bare("")
		p.Spec.NodeName = "n1"
		return p
	}(), "queued": func() *corev1.Pod {
		p := bare("")
		p.Annotations = map[string]string{q: "team-a", hbv1.DefaultedByAnnotation: "elsewhere/queue"}
		return p
	}()}
	n := 0
	for pname, p := range profs {
		for sname, start := range starts {
			for cname, edit := range cases {
				n++
				pod := start.DeepCopy()
				pod.Name = fmt.Sprintf("u%d", n)
				what := pname + "/" + sname + "/" + cname
				wh, pol := create(t, c, w, p.webhook, pod), create(t, c, w, p.policy, pod)
				equivalent(t, what+" (create)", pod, wh, pol)
				if wh.err != "" || pol.err != "" {
					continue
				}
				ensureAnnotations := func(p *corev1.Pod) {
					if p.Annotations == nil {
						p.Annotations = map[string]string{}
					}
					edit(p)
				}
				equivalent(t, what, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{}},
					update(t, c, w, p.webhook, pod.Name, ensureAnnotations), update(t, c, w, p.policy, pod.Name, ensureAnnotations))
			}
		}
	}
}

// TestEquivalentUpstreamPodTemplates creates, as bare Pods, the pod templates of Volcano's own
// example Jobs (volcano.sh/volcano example/, from the module cache) and of the JobSet project's KEP
// examples, in both modes, under a policy that fills everything and one that fills a soft topology.
func TestEquivalentUpstreamPodTemplates(t *testing.T) {
	c, w := warningClient(t)
	var pods []*corev1.Pod
	var sources []string
	vc, err := builders.VolcanoExampleJobs()
	require.NoError(t, err)
	require.NotEmpty(t, vc, "Volcano's examples")
	for _, ex := range vc {
		for _, task := range ex.Job.Spec.Tasks {
			pods = append(pods, &corev1.Pod{ObjectMeta: *task.Template.ObjectMeta.DeepCopy(), Spec: *task.Template.Spec.DeepCopy()})
			sources = append(sources, "volcano "+ex.Source+" task "+task.Name)
		}
	}
	js, err := builders.JobSetKEPExamples()
	require.NoError(t, err)
	for _, ex := range js {
		if ex.Err != nil {
			continue
		}
		for _, rj := range ex.JobSet.Spec.ReplicatedJobs {
			tpl := rj.Template.Spec.Template
			pods = append(pods, &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy()})
			sources = append(sources, "jobset "+ex.Source+" replicatedJob "+rj.Name)
		}
	}
	t.Logf("%d pod templates from %d Volcano Jobs and %d JobSet examples", len(pods), len(vc), len(js))
	profs := map[string]pair{
		"team-a": profile(t, "ex-team-a", map[string]string{"team": "a"}, nil),
		"soft":   profile(t, "ex-soft", map[string]string{"team": "soft"}, nil),
	}
	for pname, p := range profs {
		for i, pod := range pods {
			pod = pod.DeepCopy()
			pod.Name, pod.GenerateName = fmt.Sprintf("ex-%d", i), ""
			equivalent(t, pname+"/"+sources[i], pod, create(t, c, w, p.webhook, pod), create(t, c, w, p.policy, pod))
		}
	}
}
