package hypernode

import (
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Discover reads a provider's source and returns its desired groups. An error means the source
// could not be read; the tree is then left as it is.
type Discover func() ([]Group, error)

// Runner is the part every built-in provider shares: it runs a round at start, every interval and
// shortly after Trigger (several triggers within Debounce make one round), and sends each round
// through a Syncer. A failed round is retried with backoff, from one second up to the interval.
// Providers embed it and add their own Discover.
type Runner struct {
	source   string
	interval time.Duration
	discover Discover
	log      logr.Logger
	// Debounce is the quiet time after a Trigger before the round runs; default 1s.
	Debounce time.Duration

	syncer  *Syncer
	trigger chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	// round serialises Round: the loop and a direct caller never sync at once.
	round sync.Mutex
}

// NewRunner returns a Runner for source.
func NewRunner(source string, interval time.Duration, discover Discover, log logr.Logger) *Runner {
	return &Runner{
		source: source, interval: interval, discover: discover, log: log, Debounce: time.Second,
		trigger: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// errNotStarted is Round's error before Start.
var errNotStarted = errors.New("the provider has not started yet")

// Name implements Provider.
func (r *Runner) Name() string { return r.source }

// Start implements Provider.
func (r *Runner) Start(eventCh chan<- Event, replyCh <-chan Reply, informer HyperNodeInformer) error {
	if eventCh == nil || informer == nil {
		return errors.New("start needs an event channel and an informer")
	}
	r.round.Lock()
	r.syncer = &Syncer{Source: r.source, Events: eventCh, Replies: replyCh, Informer: informer}
	r.round.Unlock()
	informer.OnChange(r.Trigger)
	go r.loop()
	return nil
}

// Stop implements Provider: it returns after the running round, if any, has stopped.
func (r *Runner) Stop() error {
	r.once.Do(func() { close(r.stop) })
	r.round.Lock()
	started := r.syncer != nil
	r.round.Unlock()
	if started {
		<-r.done
	}
	return nil
}

// Trigger asks for a round soon.
func (r *Runner) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

func (r *Runner) loop() {
	defer close(r.done)
	retry := time.Second
	wait := time.Duration(0)
	for {
		timer := time.NewTimer(wait)
		select {
		case <-r.stop:
			timer.Stop()
			return
		case <-timer.C:
		case <-r.trigger:
			timer.Stop()
			// Coalesce a burst of triggers (a rack of Nodes relabelled, our own writes echoed).
			quiet := time.NewTimer(r.Debounce)
		burst:
			for {
				select {
				case <-r.trigger:
					if !quiet.Stop() {
						<-quiet.C
					}
					quiet.Reset(r.Debounce)
				case <-quiet.C:
					break burst
				case <-r.stop:
					quiet.Stop()
					return
				}
			}
		}
		if err := r.Round(); err != nil {
			if errors.Is(err, ErrStopped) {
				return
			}
			wait = retry
			retry = min(retry*2, r.interval)
			continue
		}
		retry = time.Second
		wait = r.interval
	}
}

// Round runs one discovery round now. Tests and benchmarks call it directly.
func (r *Runner) Round() error {
	r.round.Lock()
	defer r.round.Unlock()
	if r.syncer == nil {
		return errNotStarted
	}
	begin := time.Now()
	groups, err := r.discover()
	if err != nil {
		roundsTotal.WithLabelValues(r.source, "error").Inc()
		r.log.Error(err, "discovery failed; the HyperNode tree is left as it was")
		return err
	}
	res, err := r.syncer.Sync(groups, r.stop)
	switch {
	case errors.Is(err, ErrStopped):
		return err
	case err != nil:
		result := "write_error"
		if res.Writes() == 0 {
			result = "error"
		}
		roundsTotal.WithLabelValues(r.source, result).Inc()
		r.log.Error(err, "discovery round failed", "creates", res.Creates, "updates", res.Updates, "deletes", res.Deletes)
		return err
	case res.Writes() == 0:
		roundsTotal.WithLabelValues(r.source, "unchanged").Inc()
		r.log.V(1).Info("discovery round: tree unchanged", "groups", len(groups), "took", time.Since(begin))
	default:
		roundsTotal.WithLabelValues(r.source, "changed").Inc()
		r.log.Info("discovery round wrote the difference", "creates", res.Creates, "updates", res.Updates, "deletes", res.Deletes, "took", time.Since(begin))
	}
	lastSuccess.WithLabelValues(r.source).SetToCurrentTime()
	return nil
}
