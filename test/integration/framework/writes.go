package framework

import (
	"net/http"
	"strings"
	"sync"
)

// WriteCounter counts the mutating requests (POST, PUT, PATCH, DELETE) a client sends, by resource
// and name ("podgroups/<name>", "hypernodes/<name>"), at the HTTP transport, and keeps their order.
// Install it with rest.Config.Wrap(counter.RoundTrip).
type WriteCounter struct {
	mu     sync.Mutex
	byPath map[string]int
	log    []string
}

// NewWriteCounter returns an empty counter.
func NewWriteCounter() *WriteCounter { return &WriteCounter{byPath: map[string]int{}} }

// RoundTrip wraps next.
func (w *WriteCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
			if len(parts) >= 2 {
				key := parts[len(parts)-2] + "/" + parts[len(parts)-1]
				if parts[len(parts)-1] == "status" && len(parts) >= 3 {
					key = parts[len(parts)-3] + "/" + parts[len(parts)-2]
				}
				w.mu.Lock()
				w.byPath[key]++
				w.log = append(w.log, req.Method+" "+key)
				w.mu.Unlock()
			}
		}
		return next.RoundTrip(req)
	})
}

// For is the number of writes to kind ("podgroups", "jobsets") named name.
func (w *WriteCounter) For(kind, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byPath[kind+"/"+name]
}

// Len is the number of writes so far; Since(n) lists the writes after the first n, in order, as
// "<METHOD> <kind>/<name>".
func (w *WriteCounter) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.log)
}

// Since lists the writes after the first n.
func (w *WriteCounter) Since(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log[n:]...)
}
