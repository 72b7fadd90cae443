package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// down stops every process with a PID file, checks that the ports are free and removes the etcd data
// and PID files. Running it again (or on a dir that never ran) is harmless.
func down(l layout) error {
	if _, err := os.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		fmt.Printf("nothing to stop: %s does not exist\n", l.rel(l.dir))
		return nil
	}
	procs, err := l.recordedProcs()
	if err != nil {
		return err
	}
	rank := map[string]int{}
	for i, n := range stopOrder {
		rank[n] = i + 1
	}
	order := func(name string) int {
		if r, ok := rank[name]; ok {
			return r
		}
		return 0 // unknown components first
	}
	sortByOrder(procs, order)
	var failures []string
	for _, rp := range procs {
		switch {
		case rp.Alive:
			if err := terminate(rp, 10*time.Second); err != nil {
				failures = append(failures, err.Error())
				continue
			}
			fmt.Printf("stopped %s (PID %d)\n", rp.Name, rp.PID)
		default:
			fmt.Printf("%s: %s (stale PID file removed)\n", rp.Name, rp.Note)
		}
		_ = os.Remove(rp.PIDFile)
	}
	if len(failures) > 0 {
		return fmt.Errorf("could not stop everything: %s", strings.Join(failures, "; "))
	}

	base := l.portBase
	if s, ok := l.readState(); ok {
		base = s.PortBase
	}
	var busy []string
	for _, pu := range portsFrom(base).all() {
		if inUse, owner := portBusy(pu.Port); inUse {
			busy = append(busy, fmt.Sprintf("127.0.0.1:%d (%s) is still held by %s", pu.Port, pu.Use, owner))
		}
	}
	for _, d := range []string{l.etcdDir(), l.pidsDir()} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("processes stopped, but ports are still in use (not by a process of this cluster's PID files; left alone):\n  %s", strings.Join(busy, "\n  "))
	}
	fmt.Printf("local cluster in %s is down (logs kept in %s/)\n", l.rel(l.dir), l.rel(l.logsDir()))
	return nil
}

func sortByOrder(procs []recordedProc, order func(string) int) {
	for i := 1; i < len(procs); i++ {
		for j := i; j > 0 && order(procs[j].Name) < order(procs[j-1].Name); j-- {
			procs[j], procs[j-1] = procs[j-1], procs[j]
		}
	}
}

// status prints which components run and whether the API server answers.
func status(ctx context.Context, l layout) error {
	procs, err := l.recordedProcs()
	if err != nil {
		return err
	}
	byName := map[string]recordedProc{}
	for _, rp := range procs {
		byName[rp.Name] = rp
	}
	running := 0
	for i := len(stopOrder) - 1; i >= 0; i-- {
		name := stopOrder[i]
		rp, ok := byName[name]
		switch {
		case !ok:
			fmt.Printf("  %-24s stopped\n", name)
		case rp.Alive:
			running++
			fmt.Printf("  %-24s running (PID %d, log %s)\n", name, rp.PID, l.rel(l.logFile(name)))
		default:
			fmt.Printf("  %-24s not running: %s (log %s)\n", name, rp.Note, l.rel(l.logFile(name)))
		}
	}
	if running == 0 {
		fmt.Printf("no local cluster runs from %s (start one with `make run`)\n", l.rel(l.dir))
		return nil
	}
	if s, ok := l.readState(); ok {
		l.portBase = s.PortBase
	}
	p := newPKI(l.pkiDir())
	client, err := l.tlsClient(p)
	if err != nil {
		return err
	}
	url := "https://" + loopback(l.ports().APIServer) + "/readyz"
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := httpReady(client, url, "")(cctx); err != nil {
		fmt.Printf("API server: not ready (%v)\n", err)
	} else {
		fmt.Printf("API server: ready at https://%s; export KUBECONFIG=%s\n", loopback(l.ports().APIServer), l.kubeconfig())
	}
	return nil
}
