package main

// Chart mode (`up --real-nodes N --chart`, `make run REAL_NODES=2 CHART=1`): hyperbatch's manager and
// scheduler are not host processes but the pods of `helm install charts/hyperbatch`, running on the
// real nodes from make images' hyperbatch image: two replicas of each with leader election,
// PodDisruptionBudgets, the manager's self-managed certificates, the webhooks reached by the API
// server through their Service, and in-cluster config as the chart's ServiceAccounts. The
// neighbours (Volcano's controllers, the JobSet controller) stay host processes (docs/development.md).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

const (
	// chartRelease is the Helm release of chart mode, in systemNamespace.
	chartRelease = "hyperbatch"
	// realHyperbatchImage is make images' image of the manager and scheduler.
	realHyperbatchImage = "hyperbatch.local/hyperbatch:dev"
	// The chart's leader-election Leases (cmd/manager/run.go; the scheduler's ConfigMap).
	managerLease   = "hyperbatch-manager.hyperbatch.dev"
	schedulerLease = "hyperbatch-scheduler"
	chartTimeout   = 180 * time.Second
)

// chartComponents are the chart's Deployments, each with its leader-election Lease.
var chartComponents = []struct{ deployment, lease string }{
	{"hyperbatch-manager", managerLease},
	{"hyperbatch-scheduler", schedulerLease},
}

// chartValues are the values chart mode installs with: make images' image, never pulled (there is no
// registry: a missing image fails at once with ErrImageNeverPull), on the real nodes only (the
// default scheduler would otherwise put the pods on kwok nodes, where nothing runs).
func chartValues() string {
	repo, tag, _ := strings.Cut(realHyperbatchImage, ":")
	return fmt.Sprintf(`image: {repository: %s, tag: %s, pullPolicy: Never}
nodeSelector: {%s: %s}
`, repo, tag, realNodeLabel, realNodeLabelValue)
}

// helmCommand is bin/helm against the cluster, with Helm's cache, configuration and data in the
// cluster's directory (nothing under $HOME).
func (l layout) helmCommand(ctx context.Context, cl localproc.Cluster, args ...string) *exec.Cmd {
	home := filepath.Join(cl.Dir, "helm")
	cmd := exec.CommandContext(ctx, filepath.Join(l.bin, "helm"), append(args, "--kubeconfig", cl.Kubeconfig())...)
	cmd.Dir = l.root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	return cmd
}

// installChart installs the chart and waits until every component is Ready: both Deployments with
// all replicas Ready, both Leases held by one of their pods, the caBundle injected into every webhook
// of the chart's configurations, and a webhook answering the API server through its Service.
func (l layout) installChart(ctx context.Context, k *kube, r realNodes) error {
	cl := k.cl
	if err := r.checkImage(ctx, realHyperbatchImage); err != nil {
		return err
	}
	values := filepath.Join(cl.Dir, "chart-values.yaml")
	if err := os.WriteFile(values, []byte(chartValues()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", values, err)
	}
	logPath := cl.LogFile("helm")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer func() { _ = f.Close() }()
	begin := time.Now()
	cmd := l.helmCommand(ctx, cl, "install", chartRelease, filepath.Join(l.root, "charts", "hyperbatch"), "--namespace", systemNamespace, "--values", values)
	_, _ = fmt.Fprintf(f, "# %s\n", strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm install %s charts/hyperbatch failed (%w).\n%s", chartRelease, err, logTail(logPath))
	}
	installed := time.Since(begin)
	leaders, err := k.waitChartReady(ctx, begin.Add(chartTimeout))
	if err != nil {
		return err
	}
	step("chart installed: helm install %s (%s), then manager and scheduler 2/2 Ready each, leaders %s, webhook answering through Service %s/hyperbatch-webhook (%s in all)",
		chartRelease, installed.Round(100*time.Millisecond), strings.Join(leaders, " and "), systemNamespace, since(begin))
	return nil
}

// checkImage fails, naming the image, when a real node's containerd does not hold ref.
func (r realNodes) checkImage(ctx context.Context, ref string) error {
	for i := 0; i < r.n; i++ {
		out, err := exec.CommandContext(ctx, filepath.Join(r.bin, "ctr"), "--address", r.socket(i), "--namespace", realImageNS, "images", "ls", "-q").CombinedOutput()
		if err != nil {
			return fmt.Errorf("listing the images of %s's containerd: %w: %s", r.name(i), err, strings.TrimSpace(string(out)))
		}
		if !containsLine(string(out), ref) {
			return fmt.Errorf("image %s is not in %s's containerd, so the chart's pods cannot start (no registry; pullPolicy Never): run `make images` (it loads the image into a running cluster)", ref, r.name(i))
		}
	}
	return nil
}

func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// waitChartReady waits until the chart's components are Ready (see installChart) and returns the two
// leaders' pod names. It fails at once, naming the image, when a pod cannot get its image.
func (k *kube) waitChartReady(ctx context.Context, deadline time.Time) ([]string, error) {
	for {
		var pods corev1.PodList
		if err := k.c.List(ctx, &pods, client.InNamespace(systemNamespace), client.MatchingLabels{"app.kubernetes.io/instance": chartRelease}); err != nil {
			return nil, fmt.Errorf("listing the chart's pods: %w", err)
		}
		if err := podImageError(pods.Items); err != nil {
			return nil, err
		}
		leaders, waiting, err := k.chartState(ctx, pods.Items)
		if err != nil {
			return nil, err
		}
		if waiting == "" {
			return leaders, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the chart's components are not Ready after %s: %s.\npods: %s\n(kubectl -n %s describe pods; logs of the kubelets in %s/)",
				chartTimeout, waiting, podSummary(pods.Items), systemNamespace, k.cl.LogsDir())
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// chartState reports the leaders and, while not every component is Ready, what is still missing.
func (k *kube) chartState(ctx context.Context, pods []corev1.Pod) (leaders []string, waiting string, err error) {
	for _, c := range chartComponents {
		var d appsv1.Deployment
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: c.deployment}, &d); err != nil {
			return nil, "", fmt.Errorf("reading Deployment %s/%s: %w", systemNamespace, c.deployment, err)
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
			return nil, fmt.Sprintf("Deployment %s has %d of %d replicas Ready", c.deployment, d.Status.ReadyReplicas, want), nil
		}
		holder, err := k.leaseHolder(ctx, c.lease)
		if err != nil {
			return nil, "", err
		}
		pod := holderPod(holder, pods)
		if pod == "" {
			return nil, fmt.Sprintf("Lease %s/%s is held by %q, not by a pod of the release", systemNamespace, c.lease, holder), nil
		}
		leaders = append(leaders, pod)
	}
	for _, name := range []string{"hyperbatch-mutating", "hyperbatch-validating"} {
		missing, err := k.missingCABundles(ctx, name)
		if err != nil {
			return nil, "", err
		}
		if missing > 0 {
			return nil, fmt.Sprintf("%d webhooks of %s have no caBundle yet (the manager's certificate rotator injects it)", missing, name), nil
		}
	}
	if waiting := k.webhookWaiting(ctx); waiting != "" {
		return nil, waiting, nil
	}
	return leaders, "", nil
}

func (k *kube) leaseHolder(ctx context.Context, name string) (string, error) {
	var lease coordinationv1.Lease
	err := k.c.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: name}, &lease)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading Lease %s/%s: %w", systemNamespace, name, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// holderPod is the pod whose name starts a Lease holder identity ("<pod>_<uuid>", as controller-runtime
// and kube-scheduler write it), or "".
func holderPod(holder string, pods []corev1.Pod) string {
	name, _, _ := strings.Cut(holder, "_")
	for _, p := range pods {
		if p.Name == name && p.DeletionTimestamp == nil {
			return name
		}
	}
	return ""
}

// missingCABundles counts the webhooks of a configuration (mutating or validating) without a caBundle.
func (k *kube) missingCABundles(ctx context.Context, name string) (int, error) {
	missing := 0
	if strings.Contains(name, "mutating") {
		var m admissionregistrationv1.MutatingWebhookConfiguration
		if err := k.c.Get(ctx, client.ObjectKey{Name: name}, &m); err != nil {
			return 0, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range m.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				missing++
			}
		}
		return missing, nil
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, &v); err != nil {
		return 0, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", name, err)
	}
	for _, w := range v.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			missing++
		}
	}
	return missing, nil
}

// webhookWaiting creates a PodGroup in dry-run mode: the API server calls hyperbatch's PodGroup
// webhooks (failurePolicy Fail) through the Service, so success ("") means a manager pod answered over
// TLS with a certificate the injected caBundle verifies; otherwise it says what failed.
func (k *kube) webhookWaiting(ctx context.Context) string {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hyperbatch-webhook-probe"},
		Spec:       schedulingv1beta1.PodGroupSpec{MinMember: 1},
	}
	if err := k.c.Create(ctx, pg, client.DryRunAll); err != nil {
		return "the API server cannot call the webhook through its Service yet (dry-run PodGroup create: " + err.Error() + ")"
	}
	return ""
}

// podImageError names the image of the first chart pod that cannot get it.
func podImageError(pods []corev1.Pod) error {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			switch w.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
				return fmt.Errorf("pod %s/%s on %s cannot start: image %s: %s: %s. Build and load it with `make images`",
					p.Namespace, p.Name, p.Spec.NodeName, cs.Image, w.Reason, w.Message)
			}
		}
	}
	return nil
}

// podSummary is each pod's node, phase and container state, for a timeout message.
func podSummary(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "none"
	}
	var out []string
	for i := range pods {
		p := &pods[i]
		out = append(out, fmt.Sprintf("%s on %q %s (%s)", p.Name, p.Spec.NodeName, p.Status.Phase, containerState(p)))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// errChartNeedsRealNodes is the refusal of --chart without real nodes.
var errChartNeedsRealNodes = errors.New("--chart installs hyperbatch's pods on real nodes: add --real-nodes 2 (make run REAL_NODES=2 CHART=1)")
