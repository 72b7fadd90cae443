// Command localcluster runs hyperbatch's local development cluster from the binaries in bin/: etcd,
// kube-apiserver, kube-controller-manager, kwok (fake nodes), hyperbatch's manager and scheduler, and
// the neighbours a user's cluster runs: Volcano's controller-manager and webhook-manager, the JobSet
// controller and Kubeflow Trainer's controller manager (neighbours.go).
//
//	go run ./hack/localcluster up [--nodes 16] [--dir _output/local] [--bin bin] [--port-base 16443] [--no-demo]
//	                              [--no-volcano] [--no-volcano-webhooks] [--no-jobset] [--no-trainer] [--discover] [--real-nodes 2 [--chart]]
//	go run ./hack/localcluster up --multicluster [--dir _output/local] [--port-base 16443] [--no-demo]
//	go run ./hack/localcluster down [--dir _output/local]
//	go run ./hack/localcluster status [--dir _output/local]
//	go run ./hack/localcluster load-images [--dir _output/local] [--images _output/images]
//	go run ./hack/localcluster stop-kubelet|start-kubelet --node 1 [--dir _output/local]
//
// Everything listens on 127.0.0.1 only, except with --real-nodes: the API server and the kubelets
// listen on addresses of the pods' bridge hb0 (10.244.0.0/16), local to this machine. `make run` and
// `make down` call this program.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

const modulePath = "github.com/hyperbatch/hyperbatch"

const usage = `usage: localcluster <command> [flags]

commands:
  up      start etcd, kube-apiserver, kube-controller-manager, kwok, hyperbatch manager and scheduler,
          create kwok nodes and a HyperNode tree, then run a demo pod as acceptance check;
          with --multicluster: a Karmada control plane and two member clusters instead
  down    stop every process of the cluster, free its ports, remove its etcd data
  status  show which components run
  load-images  import make images' archives (_output/images/) into every real node's containerd
  stop-kubelet   stop one real node's kubelet (its containerd and containers keep running): the node goes NotReady
  start-kubelet  start that kubelet again, as up started it

run "localcluster <command> -h" for the flags of a command
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// controller-runtime's envtest (installing CRDs) logs through its logger; the steps are printed here.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1], os.Args[2:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nlocalcluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet("localcluster "+cmd, flag.ContinueOnError)
	dir := fs.String("dir", "_output/local", "directory for the cluster's data, logs, PID files and kubeconfig")
	var (
		bin      *string
		portBase *int
		nodes    *int
		noDemo   *bool
		discover *bool
		multi    *bool
		real     *int
		chart    *bool
		images   *string
		node     *int
		nb       neighbourOptions
	)
	imagesFlag := func() *string {
		return fs.String("images", "_output/images", "directory of `make images`' archives (pause.tar, worker.tar, hyperbatch.tar) the real nodes' containerds import")
	}
	switch cmd {
	case "up":
		bin = fs.String("bin", "bin", "directory holding etcd, kube-apiserver, kube-controller-manager, kubectl, kwok, manager, scheduler")
		portBase = fs.Int("port-base", 16443, fmt.Sprintf("first of %d consecutive loopback ports (kube-apiserver gets this one); with --multicluster the members use the blocks 100 and 200 above it", localproc.PortCount))
		multi = fs.Bool("multicluster", false, "start a Karmada v1.16 control plane (with hyperbatch's manager in control-plane mode) and two member clusters with different GPU capacity and HyperNode trees, joined in Push mode, instead of one cluster; the demo runs a HyperJob across both")
		nodes = fs.Int("nodes", 16, "number of kwok nodes (4 per leaf HyperNode, 2 leaves per spine, one top)")
		noDemo = fs.Bool("no-demo", false, "skip the acceptance checks (a hyperbatch-scheduler pod must become Running; with Volcano, a Volcano Job must complete)")
		discover = fs.Bool("discover", false, "let the manager's HyperNode discovery build the tree from the kwok nodes' topology labels (Volcano's label source) instead of writing the fixed sample tree")
		fs.BoolVar(&nb.noVolcano, "no-volcano", false, "do not start Volcano's controller-manager and webhook-manager (nor create Volcano Queues)")
		fs.BoolVar(&nb.noVolcanoWebhooks, "no-volcano-webhooks", false, "do not start Volcano's webhook-manager (its controllers still run)")
		fs.BoolVar(&nb.noJobSet, "no-jobset", false, "do not start the JobSet controller (nor Kubeflow Trainer's, whose TrainJobs become JobSets)")
		fs.BoolVar(&nb.noTrainer, "no-trainer", false, "do not start Kubeflow Trainer's controller manager")
		images = imagesFlag()
		chart = fs.Bool("chart", false, "with --real-nodes: install hyperbatch's manager and scheduler with `helm install charts/hyperbatch` (make images' image, 2 replicas each, on the real nodes) instead of running them as host processes (docs/development.md, \"Chart mode\")")
		real = fs.Int("real-nodes", 0, "also start this many real nodes (2..8: kubelets with containerd, runc and the CNI bridge, one kube-proxy; needs root, `make images` and hack/realnodes-prereqs.sh; docs/development.md)")
	case "load-images":
		images = imagesFlag()
	case "stop-kubelet", "start-kubelet":
		node = fs.Int("node", -1, "the real node whose kubelet to stop or start (i of real-node-<i>)")
	case "down", "status":
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	l, err := newLayout(*dir, bin, portBase)
	if err != nil {
		return err
	}
	if images != nil {
		l.images = l.abs(*images)
	}
	switch cmd {
	case "up":
		return up(ctx, l, upOptions{nodes: *nodes, noDemo: *noDemo, discover: *discover, multicluster: *multi, realNodes: *real, chart: *chart, neighbourOptions: nb})
	case "down":
		return down(l)
	case "load-images":
		return loadImages(ctx, l)
	case "stop-kubelet":
		return stopKubelet(l, *node)
	case "start-kubelet":
		return startKubelet(ctx, l, *node)
	default:
		return status(ctx, l)
	}
}

// abs resolves p against the repository root.
func (l layout) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(l.root, p)
}

// newLayout resolves relative paths against the repository root (the nearest directory at or above the
// working directory whose go.mod declares hyperbatch's module), so the command works from any subdirectory.
func newLayout(dir string, bin *string, portBase *int) (layout, error) {
	wd, err := os.Getwd()
	if err != nil {
		return layout{}, fmt.Errorf("finding the working directory: %w", err)
	}
	root := wd
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module "+modulePath+"\n") {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	l := layout{root: root, portBase: 16443}
	abs := l.abs
	l.dir, l.bin, l.images = abs(dir), abs("bin"), abs(filepath.Join("_output", "images"))
	if bin != nil {
		l.bin = abs(*bin)
	}
	if portBase != nil {
		l.portBase = *portBase
	}
	return l, nil
}
