package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// stopKubelet stops real node i's kubelet (SIGTERM, SIGKILL after 10 s) and leaves everything else
// running: its containerd, the shims and the containers they run, so the node goes NotReady the way
// a node whose kubelet died does (the node lifecycle controller marks it Unknown once its Lease is
// older than --node-monitor-grace-period, and taints it node.kubernetes.io/unreachable).
func stopKubelet(l layout, node int) error {
	r, err := l.realNodesOf(node)
	if err != nil {
		return err
	}
	comp := fmt.Sprintf("kubelet-%d", node)
	procs, err := localproc.ReadPIDFiles(r.cl.PidsDir())
	if err != nil {
		return err
	}
	for _, rp := range procs {
		if rp.Cluster != r.cl.Name || rp.Component != comp {
			continue
		}
		if !rp.Alive {
			_ = os.Remove(rp.PIDFile)
			return fmt.Errorf("%s is not running (%s); `localcluster start-kubelet --node %d` starts it", rp.Process(), rp.Note, node)
		}
		if err := localproc.Terminate(rp, 10*time.Second); err != nil {
			return err
		}
		_ = os.Remove(rp.PIDFile)
		fmt.Printf("stopped %s (PID %d); %s's containerd and containers keep running\n", rp.Process(), rp.PID, r.name(node))
		return nil
	}
	return fmt.Errorf("%s has no PID file in %s: it is not running; `localcluster start-kubelet --node %d` starts it", r.cl.Process(comp), r.cl.PidsDir(), node)
}

// startKubelet starts real node i's kubelet again, as `up` started it (same flags, PID file and
// log, the earlier log kept as <log>.<unix time>), and returns once its health endpoint answers. It
// does not wait for the node to be Ready.
func startKubelet(ctx context.Context, l layout, node int) error {
	r, err := l.realNodesOf(node)
	if err != nil {
		return err
	}
	c := r.kubelets()[node]
	pidFile := r.cl.PIDFile(c.Name)
	if b, err := os.ReadFile(pidFile); err == nil {
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil {
			if alive, _ := localproc.ProcessMatches(pid, c.Name); alive {
				return fmt.Errorf("%s already runs (PID %d)", r.cl.Process(c.Name), pid)
			}
		}
	}
	log := r.cl.LogFile(c.Name)
	if _, err := os.Stat(log); err == nil {
		if err := os.Rename(log, fmt.Sprintf("%s.%d", log, time.Now().Unix())); err != nil {
			return fmt.Errorf("keeping the earlier log of %s: %w", c.Name, err)
		}
	}
	begin := time.Now()
	if _, err := localproc.StartReady(ctx, c, localproc.StartOptions{Process: r.cl.Process(c.Name), LogPath: log, PIDPath: pidFile, Dir: l.root, Session: true}); err != nil {
		return err
	}
	fmt.Printf("started %s (healthz answered after %s)\n", r.cl.Process(c.Name), since(begin))
	return nil
}

// realNodesOf finds the cluster of dir that runs real nodes and checks node is one of them.
func (l layout) realNodesOf(node int) (realNodes, error) {
	for _, cl := range l.stateOf().Clusters {
		rs, ok := readRealState(realNodesDir(cl.Dir))
		if !ok {
			continue
		}
		if node < 0 || node >= rs.N {
			return realNodes{}, fmt.Errorf("--node %d: cluster %s has real nodes 0..%d", node, cl.Name, rs.N-1)
		}
		return newRealNodes(l, cl, rs.N), nil
	}
	return realNodes{}, fmt.Errorf("no real nodes run from %s: start them with `make run REAL_NODES=2`", l.rel(l.dir))
}
