package hypernode

import (
	"errors"
	"fmt"
)

// Syncer sends a provider's desired tree as the minimal events and waits for them to be written.
// Providers keep one and call Sync once per round; it is not safe for concurrent use.
type Syncer struct {
	Source   string
	Events   chan<- Event
	Replies  <-chan Reply
	Informer HyperNodeInformer
	round    uint64
}

// RoundResult counts the events of one round.
type RoundResult struct {
	Creates, Updates, Deletes int
}

// Writes is the number of events sent.
func (r RoundResult) Writes() int { return r.Creates + r.Updates + r.Deletes }

// ErrStopped is returned when stop closes before a round finished.
var ErrStopped = errors.New("discovery stopped")

// Sync builds the desired HyperNodes from groups, diffs them against the informer and sends the
// difference, then waits until the framework has written it. A Build error sends nothing, so the
// tree stays as it was. A write that failed after the framework's retries is returned; the rest
// of that round was skipped and the next Sync resends what is still missing.
func (s *Syncer) Sync(groups []Group, stop <-chan struct{}) (RoundResult, error) {
	var res RoundResult
	if !s.Informer.WaitIdle(s.Source, stop) {
		return res, ErrStopped
	}
	_ = s.drainReplies() // replies of an earlier round that stopped before reading them
	desired, err := Build(s.Source, groups, func(name string) bool {
		hn, ok := s.Informer.Get(name)
		return ok && hn.Labels[SourceLabel] != s.Source
	})
	if err != nil {
		return res, fmt.Errorf("building the %s tree: %w", s.Source, err)
	}
	events := Diff(desired, s.Informer.List(s.Source))
	if len(events) == 0 {
		return res, nil
	}
	s.round++
	s.Informer.Expect(s.Source, len(events))
	for i, ev := range events {
		ev.Round = s.round
		select {
		case s.Events <- ev:
		case <-stop:
			// The framework never saw the rest: release them.
			s.Informer.Expect(s.Source, -(len(events) - i))
			return res, ErrStopped
		}
		switch ev.Type {
		case EventCreate:
			res.Creates++
		case EventUpdate:
			res.Updates++
		case EventDelete:
			res.Deletes++
		}
	}
	if !s.Informer.WaitIdle(s.Source, stop) {
		return res, ErrStopped
	}
	return res, s.drainReplies()
}

// drainReplies returns the errors replied so far.
func (s *Syncer) drainReplies() error {
	var errs []error
	for {
		select {
		case r := <-s.Replies:
			errs = append(errs, r.Err)
		default:
			return errors.Join(errs...)
		}
	}
}
