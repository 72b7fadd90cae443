package main

// The neighbours: the upstream workload controllers a user's cluster runs next to hyperbatch, started
// by `up` unless a --no-* flag leaves them out:
//   - Volcano's controller-manager (job, pg, queue, gc controllers; no HyperNode discovery, which would
//     overwrite the local HyperNode tree),
//   - Volcano's webhook-manager with its own serving certificate, and the webhook configurations
//     Volcano's Helm chart installs (URL mode on loopback instead of a Service),
//   - the JobSet controller with its JobSet webhooks (its internal cert rotation is off: it needs a
//     Service and Secret; the local CA signs its serving certificate instead),
//   - Kubeflow Trainer's controller manager (localproc.TrainerController, as the tests run it: its
//     certificate management off, its webhooks not registered), which turns TrainJobs into JobSets;
//     with --no-jobset it is left out too, since nothing would run its JobSets,
//   - the Volcano Queues `root` and `default` (as Volcano's scheduler creates them) and the demo's queues.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// neighbourOptions say which neighbours `up` leaves out.
type neighbourOptions struct {
	noVolcano, noVolcanoWebhooks, noJobSet, noTrainer bool
}

// demoQueues are the Volcano Queues the local cluster creates: Volcano's own two and the README's.
var demoQueues = []string{"root", "default", "team-a", "shared"}

// neighbours lists the neighbours o keeps, in start order, after checking their binaries exist.
func (l layout) neighbours(cl localproc.Cluster, o neighbourOptions) (localproc.Stage, error) {
	var out localproc.Stage
	if !o.noVolcano {
		out = append(out, localproc.Volcano(cl, l.bin, !o.noVolcanoWebhooks)...)
	}
	if !o.noJobSet {
		js, err := localproc.JobSet(cl, l.bin)
		if err != nil {
			return nil, err
		}
		out = append(out, js...)
		if !o.noTrainer {
			tr, err := localproc.Trainer(cl, l.bin)
			if err != nil {
				return nil, err
			}
			out = append(out, tr...)
		}
	}
	var missing []string
	for _, c := range out {
		if !isExecutable(c.Binary) {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	return nil, fmt.Errorf("missing tools in %s: %s.\nBuild them with `hack/tools.sh %s` (part of `make test-tools`; several minutes the first time), or leave them out with --no-volcano / --no-volcano-webhooks / --no-jobset / --no-trainer",
		l.rel(l.bin), strings.Join(missing, ", "), strings.Join(missing, " "))
}

// installNeighbourWebhooks creates the webhook configurations of Volcano's webhook-manager (it only
// injects the caBundle into configurations that already exist, and waits for them) and of the JobSet
// controller (which, with its cert rotation off, expects them installed).
func (k *kube) installNeighbourWebhooks(ctx context.Context, o neighbourOptions) error {
	p := k.cl.PKI()
	ca, err := os.ReadFile(p.CACert)
	if err != nil {
		return fmt.Errorf("reading %s: %w", p.CACert, err)
	}
	pt := k.cl.Ports()
	var objs []client.Object
	if !o.noVolcano && !o.noVolcanoWebhooks {
		objs = append(objs, localproc.VolcanoWebhookConfigs(localproc.Loopback(pt.VolcanoWebhook), ca, "", map[string]string{managedByLabel: managedByValue})...)
	}
	if !o.noJobSet {
		objs = append(objs, jobSetWebhookConfigs(localproc.Loopback(pt.JobSetWebhook), ca)...)
	}
	for _, obj := range objs {
		if err := createIgnoringExisting(ctx, k.c, obj); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// createQueues creates demoQueues (Open, weight 1; root not reclaimable, as Volcano's scheduler makes it).
func (k *kube) createQueues(ctx context.Context) error {
	for _, name := range demoQueues {
		q := &schedulingv1beta1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(name != "root")},
		}
		if err := createIgnoringExisting(ctx, k.c, q); err != nil {
			return fmt.Errorf("creating Volcano Queue %s: %w", name, err)
		}
	}
	step("Volcano Queues %s created", strings.Join(demoQueues, ", "))
	return nil
}

const demoVolcanoJobName = "hyperbatch-demo"

// demoVolcanoJob is the second acceptance check when Volcano runs: a 3-pod Volcano Job for
// hyperbatch-scheduler gets its PodGroup and pods from Volcano's job controller, is placed, run and
// completed by kwok, and ends Completed.
func (k *kube) demoVolcanoJob(ctx context.Context) error {
	begin := time.Now()
	const timeout = 120 * time.Second
	job := demoJob()
	if err := k.c.Create(ctx, job); err != nil {
		return fmt.Errorf("demo: creating Volcano Job default/%s: %w", demoVolcanoJobName, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return fmt.Errorf("demo: reading Volcano Job default/%s: %w", demoVolcanoJobName, err)
		}
		if job.Status.State.Phase == batchv1alpha1.Completed {
			var pods corev1.PodList
			if err := k.c.List(ctx, &pods, client.InNamespace("default"),
				client.MatchingLabels{batchv1alpha1.JobNameKey: demoVolcanoJobName}); err != nil {
				return fmt.Errorf("demo: listing the Job's pods: %w", err)
			}
			nodes := map[string]bool{}
			for _, p := range pods.Items {
				nodes[p.Spec.NodeName] = true
			}
			step("demo passed: Volcano Job default/%s (3 pods) placed by %s on %d node(s) and Completed (%s)",
				demoVolcanoJobName, schedulerName, len(nodes), since(begin))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo failed: Volcano Job default/%s is %q after %s, not Completed (running %d, succeeded %d).\n%s\n%s",
				demoVolcanoJobName, job.Status.State.Phase, timeout, job.Status.Running, job.Status.Succeeded,
				logTail(k.cl.LogFile("vc-controller-manager")), logTail(k.cl.LogFile("manager")))
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
}

func demoJob() *batchv1alpha1.Job {
	task := func(name string, n int32) batchv1alpha1.TaskSpec {
		return batchv1alpha1.TaskSpec{Name: name, Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{kwokNodeLabel: kwokNodeLabelValue},
			Containers: []corev1.Container{{Name: name, Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}}}},
		}}}
	}
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: demoVolcanoJobName,
			Labels: map[string]string{managedByLabel: managedByValue}},
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: schedulerName, Queue: "default", MinAvailable: 3,
			Tasks: []batchv1alpha1.TaskSpec{task("master", 1), task("worker", 2)},
		},
	}
}

// jobSetWebhookConfigs are the JobSet controller's webhook configurations of the local cluster: its
// JobSet webhooks and, as a user's cluster has them, its pod webhooks (exclusive placement).
func jobSetWebhookConfigs(addr string, ca []byte) []client.Object {
	return localproc.WithJobSetPodWebhooks(
		localproc.JobSetWebhookConfigs(addr, ca, "", map[string]string{managedByLabel: managedByValue}), addr, ca)
}
