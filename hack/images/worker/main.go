// Command worker is the workload of the e2e suite on real nodes (the image hyperbatch.local/worker:dev
// that `make images` builds): it prints its rank and the peers it sees, runs for a given time and
// exits with a given code. Without arguments it exits 0 at once, as a pod on a kwok node completes.
//
//	worker [--duration 30s] [--exit-code 3] [--peers host-a,host-b]
//
// WORKER_DURATION, WORKER_EXIT_CODE and WORKER_PEERS set the same from the environment (a flag wins).
// The rank is the first of RANK, PET_NODE_RANK (Kubeflow Trainer's torchrun), JOB_COMPLETION_INDEX
// (indexed Jobs, JobSet) and VC_TASK_INDEX (Volcano) that is set. The peers are --peers and the
// hosts Volcano's svc plugin lists (VC_<TASK>_HOSTS, /etc/volcano/<task>.host), each with the
// addresses it resolves to. SIGTERM ends the worker early with 143, as a shell would.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// rankVars are the environment variables a rank is read from, first set wins.
var rankVars = []string{"RANK", "PET_NODE_RANK", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"}

type options struct {
	duration time.Duration
	exitCode int
	peers    []string
}

func main() {
	opts, err := parse(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(2)
	}
	report(os.Stdout, os.Getenv, os.Environ(), "/etc/volcano", opts.peers)
	os.Exit(run(opts, make(chan os.Signal, 1)))
}

// parse reads the flags, with the environment as their defaults.
func parse(args []string, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dur := fs.String("duration", getenv("WORKER_DURATION"), "how long to run (a Go duration: 30s, 2m)")
	code := fs.String("exit-code", getenv("WORKER_EXIT_CODE"), "the exit code after --duration (0-255)")
	peers := fs.String("peers", getenv("WORKER_PEERS"), "comma-separated peer host names to resolve")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w (usage: worker [--duration 30s] [--exit-code N] [--peers a,b])", err)
	}
	if *dur != "" {
		d, err := time.ParseDuration(*dur)
		if err != nil || d < 0 {
			return o, fmt.Errorf("--duration/WORKER_DURATION=%q: want a non-negative Go duration such as 30s", *dur)
		}
		o.duration = d
	}
	if *code != "" {
		c, err := strconv.Atoi(*code)
		if err != nil || c < 0 || c > 255 {
			return o, fmt.Errorf("--exit-code/WORKER_EXIT_CODE=%q: want an integer from 0 to 255", *code)
		}
		o.exitCode = c
	}
	o.peers = splitList(*peers)
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// report prints the host, the rank and each peer with what it resolves to.
func report(w io.Writer, getenv func(string) string, environ []string, volcanoDir string, peers []string) {
	host, _ := os.Hostname()
	_, _ = fmt.Fprintf(w, "worker: host %s\n", host)
	rank := "unknown (none of " + strings.Join(rankVars, ", ") + " is set)"
	for _, v := range rankVars {
		if r := getenv(v); r != "" {
			rank = r + " (" + v + ")"
			break
		}
	}
	_, _ = fmt.Fprintf(w, "worker: rank %s\n", rank)
	all := peerList(environ, volcanoDir, peers)
	_, _ = fmt.Fprintf(w, "worker: %d peers\n", len(all))
	for _, p := range all {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, p)
		cancel()
		if err != nil {
			_, _ = fmt.Fprintf(w, "worker: peer %s: unresolved (%v)\n", p, err)
			continue
		}
		_, _ = fmt.Fprintf(w, "worker: peer %s: %s\n", p, strings.Join(addrs, ","))
	}
}

// peerList is peers, VC_*_HOSTS and the lines of volcanoDir/*.host, sorted, without duplicates.
func peerList(environ []string, volcanoDir string, peers []string) []string {
	seen := map[string]bool{}
	for _, p := range peers {
		seen[p] = true
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "VC_") && strings.HasSuffix(k, "_HOSTS") {
			for _, p := range splitList(v) {
				seen[p] = true
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(volcanoDir, "*.host"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, p := range strings.Fields(string(b)) {
			seen[p] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// run waits opts.duration (or a signal on sigs) and returns the exit code.
func run(opts options, sigs chan os.Signal) int {
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	select {
	case <-time.After(opts.duration):
		fmt.Printf("worker: done after %s, exit code %d\n", opts.duration, opts.exitCode)
		return opts.exitCode
	case s := <-sigs:
		fmt.Printf("worker: stopped by %v before %s\n", s, opts.duration)
		return 128 + int(s.(syscall.Signal))
	}
}
