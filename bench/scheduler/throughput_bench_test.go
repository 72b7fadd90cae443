package scheduler

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/registry"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Throughput setup: 1,000 fake nodes (64 CPU, 110 pods), a tree of 100 racks × 10 nodes (tier 1),
// 10 spines (tier 2) and one zone (tier 3); workloads of 2,000 pods.
const (
	tpNodes     = 1000
	tpRack      = 10
	tpSpine     = 10
	tpPods      = 2000
	tpGangSize  = 50
	tpCreators  = 8
	defaultName = "default-scheduler"
	hbName      = "hyperbatch-scheduler"
)

// BenchmarkSchedulingThroughput measures end-to-end pods/s (create → bound) of the stock profile and
// of the hyperbatch profile (plain pods, and gangs of 50 with hard tier 2) against a real
// kube-apiserver. It needs the control-plane binaries (KUBEBUILDER_ASSETS or bin/) and is skipped
// without them. Each profile runs in its own scheduler (a scheduler's profiles must share one
// QueueSort plugin). Use -benchtime=1x: one iteration schedules 2,000 pods.
func BenchmarkSchedulingThroughput(b *testing.B) {
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "kube-apiserver")); err != nil {
		b.Skip("no control-plane binaries; set KUBEBUILDER_ASSETS")
	}
	ctrllog.SetLogger(klog.NewKlogr())
	env, err := framework.Start(framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	quietKlog(b, dir)
	setupCluster(b, cs, env)

	runs := []struct {
		name, scheduler string
		gangs           bool
	}{
		{"default-profile/plain-pods", defaultName, false},
		{"hyperbatch-profile/plain-pods", hbName, false},
		{"hyperbatch-profile/gangs-of-50", hbName, true},
	}
	seq := 0
	for _, r := range runs {
		b.Run(r.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			done := startBenchScheduler(b, ctx, env.Config, dir, r.scheduler)
			defer func() {
				cancel()
				<-done
				configz.Delete("componentconfig")
			}()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				seq++
				ns := fmt.Sprintf("tp-%d", seq)
				total += runWorkload(b, cs, env, ns, r.scheduler, r.gangs)
			}
			b.ReportMetric(float64(tpPods*b.N)/total.Seconds(), "pods/s")
		})
	}
}

func quietKlog(b *testing.B, dir string) {
	f, err := os.Create(filepath.Join(dir, "scheduler.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(f)
}

func setupCluster(b *testing.B, cs kubernetes.Interface, env *framework.Env) {
	ctx := context.Background()
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	parallel(tpNodes, func(i int) error {
		name := fmt.Sprintf("tp-node-%04d", i)
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{corev1.LabelHostname: name, "tp-rack": fmt.Sprintf("rack-%d", i/tpRack)}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		if n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		n.Spec.Taints = nil
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}, b)
	racks := tpNodes / tpRack
	parallel(racks, func(r int) error {
		return env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tp-rack-%d", r)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{{Type: topologyv1alpha1.MemberTypeNode,
				Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: map[string]string{"tp-rack": fmt.Sprintf("rack-%d", r)}}}}}}})
	}, b)
	var top []topologyv1alpha1.MemberSpec
	for s := 0; s < racks/tpSpine; s++ {
		var ms []topologyv1alpha1.MemberSpec
		for r := s * tpSpine; r < (s+1)*tpSpine; r++ {
			ms = append(ms, exactHyper(fmt.Sprintf("tp-rack-%d", r)))
		}
		if err := env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tp-spine-%d", s)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: ms}}); err != nil {
			b.Fatal(err)
		}
		top = append(top, exactHyper(fmt.Sprintf("tp-spine-%d", s)))
	}
	if err := env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "tp-zone"},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: 3, Members: top}}); err != nil {
		b.Fatal(err)
	}
}

// runWorkload creates tpPods pods (8 creators in parallel) and returns the time until all are bound.
func runWorkload(b *testing.B, cs kubernetes.Interface, env *framework.Env, ns, scheduler string, gangs bool) time.Duration {
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if gangs {
		for g := 0; g < tpPods/tpGangSize; g++ {
			if err := env.Client.Create(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("g%d", g)},
				Spec: schedulingv1beta1.PodGroupSpec{MinMember: tpGangSize, NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{
					Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(2)}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	start := time.Now()
	parallel(tpPods, func(i int) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%05d", i)},
			Spec: corev1.PodSpec{SchedulerName: scheduler, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/x", Resources: corev1.ResourceRequirements{Requests: req}}}}}
		if gangs {
			p.Annotations = map[string]string{"scheduling.k8s.io/group-name": fmt.Sprintf("g%d", i/tpGangSize)}
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}, b)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n == tpPods, nil
	})
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("%s: pods not all bound after %v", ns, elapsed)
	}
	b.StopTimer()
	_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
	b.StartTimer()
	return elapsed
}

// startBenchScheduler runs kube-scheduler with one profile: docs/scheduler-config.yaml for
// hyperbatch-scheduler, the stock defaults for default-scheduler.
func startBenchScheduler(b *testing.B, ctx context.Context, cfg *rest.Config, dir, profileName string) <-chan struct{} {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	c := clientcmdapi.NewConfig()
	c.Clusters["e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["e"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	c.Contexts["e"] = &clientcmdapi.Context{Cluster: "e", AuthInfo: "e"}
	c.CurrentContext = "e"
	if err := clientcmd.WriteToFile(*c, kubeconfig); err != nil {
		b.Fatal(err)
	}
	conf := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
		"leaderElection": map[string]any{"leaderElect": false},
		"profiles":       []any{map[string]any{"schedulerName": defaultName}},
	}
	if profileName == hbName {
		raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "scheduler-config.yaml"))
		if err != nil {
			b.Fatal(err)
		}
		js, err := yaml.ToJSON(raw)
		if err != nil {
			b.Fatal(err)
		}
		conf = nil
		if err := json.Unmarshal(js, &conf); err != nil {
			b.Fatal(err)
		}
	}
	// Same client rate limits for both (the defaults, 50 QPS, would cap the figures at the binding rate).
	conf["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 5000, "burst": 5000}
	out, _ := json.Marshal(conf)
	path := filepath.Join(dir, profileName+".yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		b.Fatal(err)
	}
	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.SecureServing.BindPort = 0
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		b.Fatal(err)
	}
	cc, s, err := app.Setup(ctx, opts, registry.Options()...)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, cc, s); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "scheduler stopped: %v\n", err)
		}
	}()
	return done
}

func parallel(n int, fn func(i int) error, b *testing.B) {
	var wg sync.WaitGroup
	errs := make(chan error, tpCreators)
	next := make(chan int)
	for w := 0; w < tpCreators; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
