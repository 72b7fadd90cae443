package scheduler

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// The processes a benchmark starts (the control plane, schedulers, controllers) run in process groups
// of their own, so a SIGINT or SIGTERM that ends the benchmark does not reach them, and they would
// outlive it (holding the bench lock's descriptor and the machine). onInterrupt stops them first.

// stopList holds what to stop if the benchmark is interrupted, newest first.
type stopList struct {
	mu    sync.Mutex
	once  sync.Once
	next  int
	stops map[int]func()
}

var onInterrupt stopList

// add registers stop, to run if SIGINT or SIGTERM arrives before remove is called.
func (l *stopList) add(stop func()) (remove func()) {
	l.once.Do(l.watch)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stops == nil {
		l.stops = map[int]func(){}
	}
	id := l.next
	l.next++
	l.stops[id] = stop
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.stops, id)
	}
}

// watch runs the registered stops, newest first, on the first SIGINT or SIGTERM, then exits.
func (l *stopList) watch() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		l.mu.Lock()
		ids := make([]int, 0, len(l.stops))
		for id := range l.stops {
			ids = append(ids, id)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(ids)))
		stops := make([]func(), 0, len(ids))
		for _, id := range ids {
			stops = append(stops, l.stops[id])
		}
		l.mu.Unlock()
		_, _ = fmt.Fprintf(os.Stderr, "benchmark interrupted (%s): stopping the %d process sets it started\n", sig, len(stops))
		for _, stop := range stops {
			stop()
		}
		os.Exit(2)
	}()
}

// stopQuietly stops processes on the interrupt path (no testing.B to log to any more).
func stopQuietly(procs ...*framework.Process) {
	for _, pr := range procs {
		if pr != nil {
			_ = pr.Stop()
		}
	}
}
