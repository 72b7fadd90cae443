package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// stateOf reads the clusters of dir's state file; without one (a dir that never ran `up` to the
// point of writing it), dir is taken as one cluster with l's port base.
func (l layout) stateOf() localproc.State {
	if s, ok := localproc.ReadState(l.dir); ok {
		return s
	}
	return localproc.State{Clusters: []localproc.Cluster{{Name: localproc.LegacyClusterName, Dir: l.dir, PortBase: l.portBase, Role: localproc.RoleStandalone}}}
}

// down stops every process with a PID file, cluster by cluster (the last started first; within a
// cluster, the reverse of its start order), removes what real nodes made on the host (realnodes_down.go),
// checks that the ports are free and removes the etcd data and PID files. Running it again (or on a dir that never ran) is harmless.
func down(l layout) error {
	if _, err := os.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		fmt.Printf("nothing to stop: %s does not exist\n", l.rel(l.dir))
		return nil
	}
	st := l.stateOf()
	var failures, busy []string
	for i := len(st.Clusters) - 1; i >= 0; i-- {
		cl := st.Clusters[i]
		procs, err := localproc.ReadPIDFiles(cl.PidsDir())
		if err != nil {
			return err
		}
		for _, rp := range cl.StopOrder(procs) {
			switch {
			case rp.Alive:
				if err := localproc.Terminate(rp, 10*time.Second); err != nil {
					failures = append(failures, err.Error())
					continue
				}
				fmt.Printf("stopped %s (PID %d)\n", rp.Process(), rp.PID)
			default:
				fmt.Printf("%s: %s (stale PID file removed)\n", rp.Process(), rp.Note)
			}
			_ = os.Remove(rp.PIDFile)
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("could not stop everything: %s", strings.Join(failures, "; "))
	}
	if err := downRealNodes(l, st); err != nil {
		return err
	}
	for _, cl := range st.Clusters {
		for _, pu := range cl.Ports().All() {
			if inUse, owner := localproc.PortBusy(pu.Port); inUse {
				busy = append(busy, fmt.Sprintf("127.0.0.1:%d (%s of cluster %s) is still held by %s", pu.Port, pu.Use, cl.Name, owner))
			}
		}
		for _, d := range []string{cl.EtcdDir(), cl.PidsDir()} {
			if err := os.RemoveAll(d); err != nil {
				return fmt.Errorf("removing %s: %w", d, err)
			}
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("processes stopped, but ports are still in use (not by a process of this cluster's PID files; left alone):\n  %s", strings.Join(busy, "\n  "))
	}
	fmt.Printf("local cluster in %s is down (logs kept in %s/)\n", l.rel(l.dir), l.rel(st.Clusters[0].LogsDir()))
	return nil
}

// status prints, cluster by cluster, which components run and whether the API server answers.
func status(ctx context.Context, l layout) error {
	st := l.stateOf()
	running := 0
	for _, cl := range st.Clusters {
		procs, err := localproc.ReadPIDFiles(cl.PidsDir())
		if err != nil {
			return err
		}
		byName := map[string]localproc.Recorded{}
		for _, rp := range procs {
			byName[rp.Component] = rp
		}
		names := cl.Started
		for _, rp := range procs {
			if !contains(names, rp.Component) {
				names = append(names, rp.Component)
			}
		}
		clusterRunning := 0
		for _, name := range names {
			rp, ok := byName[name]
			switch {
			case !ok:
				fmt.Printf("  %-32s stopped\n", cl.Process(name))
			case rp.Alive:
				clusterRunning++
				fmt.Printf("  %-32s running (PID %d, log %s)\n", cl.Process(name), rp.PID, l.rel(cl.LogFile(name)))
			default:
				fmt.Printf("  %-32s not running: %s (log %s)\n", cl.Process(name), rp.Note, l.rel(cl.LogFile(name)))
			}
		}
		running += clusterRunning
		if clusterRunning == 0 {
			continue
		}
		client, err := cl.PKI().TLSClient()
		if err != nil {
			return err
		}
		url := "https://" + cl.APIServerAddr() + "/readyz"
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = localproc.HTTPReady(client, url, "")(cctx)
		cancel()
		if err != nil {
			fmt.Printf("cluster %s: API server not ready (%v)\n", cl.Name, err)
		} else {
			fmt.Printf("cluster %s: API server ready at https://%s; export KUBECONFIG=%s (context %s)\n",
				cl.Name, cl.APIServerAddr(), l.kubeconfig(), cl.Context())
		}
	}
	if running == 0 {
		fmt.Printf("no local cluster runs from %s (start one with `make run`)\n", l.rel(l.dir))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
