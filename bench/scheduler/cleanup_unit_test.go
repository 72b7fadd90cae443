package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// podsServer serves one namespace's pods collection over HTTP/2 as the API server does for the
// requests deleteAllPods makes: DELETE with limit and continue (one page, answered with the page and
// the next token) and GET with limit. The first resetFirst DELETEs begin their answer and then
// abort the handler, as the API server's timeout filter does when its deadline passes after the
// answer has begun: the client sees the HTTP/2 stream reset (INTERNAL_ERROR).
type podsServer struct {
	mu         sync.Mutex
	pods       map[string]bool
	resetFirst int
	deletes    []deleteQuery // every DELETE's query
}

// deleteQuery is one DELETE's limit and continue.
type deleteQuery struct{ limit, cont string }

func (s *podsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/namespaces/ns/pods" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	var names []string
	for n := range s.pods {
		if n > q.Get("continue") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	if limit > 0 && len(names) > limit {
		names = names[:limit]
		list.Continue = names[limit-1]
	}
	for _, n := range names {
		list.Items = append(list.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns"}})
	}
	switch r.Method {
	case http.MethodDelete:
		s.deletes = append(s.deletes, deleteQuery{q.Get("limit"), q.Get("continue")})
		if len(s.deletes) <= s.resetFirst {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		for _, n := range names {
			delete(s.pods, n)
		}
	case http.MethodGet:
	default:
		http.Error(w, "unexpected method", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&list)
}

func startPodsServer(t *testing.T, pods, resetFirst int) (*podsServer, kubernetes.Interface) {
	t.Helper()
	s := &podsServer{pods: map[string]bool{}, resetFirst: resetFirst}
	for i := 0; i < pods; i++ {
		s.pods[fmt.Sprintf("p-%04d", i)] = true
	}
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return s, cs
}

// The cleanup of the 5,000-node failure: a DELETE whose stream is reset is retried, and the pods go
// in pages of cleanupPage, each request carrying the token of the page before.
func TestDeleteAllPodsPagesAndRetriesAResetStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// What the cleanup did before: one DeleteCollection of the namespace, lost to the reset.
	_, cs := startPodsServer(t, 450, 1)
	err := cs.CoreV1().Pods("ns").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "INTERNAL_ERROR") {
		t.Fatalf("the single DeleteCollection on a reset stream: got %v, want the stream error the 5,000-node run failed with", err)
	}

	s, cs := startPodsServer(t, 450, 1)
	if err := deleteAllPods(ctx, cs, "ns"); err != nil {
		t.Fatalf("deleteAllPods: %v", err)
	}
	if len(s.pods) != 0 {
		t.Fatalf("%d pods left", len(s.pods))
	}
	want := []deleteQuery{{"200", ""}, {"200", ""}, {"200", "p-0199"}, {"200", "p-0399"}} // the reset first page, its repeat, two more
	if fmt.Sprint(s.deletes) != fmt.Sprint(want) {
		t.Fatalf("DELETE requests (limit, continue): got %v, want %v", s.deletes, want)
	}
}

// A cleanup whose every request is lost gives up after cleanupAttempts, saying what it was doing.
func TestDeleteAllPodsGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, cs := startPodsServer(t, 10, 1000)
	err := deleteAllPods(ctx, cs, "ns")
	if err == nil || !strings.Contains(err.Error(), "deleting page 1 of the pods of namespace ns: failed 5 times in a row") || !strings.Contains(err.Error(), "INTERNAL_ERROR") {
		t.Fatalf("got %v, want the page, the attempts and the stream error", err)
	}
	if len(s.deletes) != cleanupAttempts {
		t.Fatalf("%d DELETEs, want %d", len(s.deletes), cleanupAttempts)
	}
}

func TestRetriable(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("stream error: stream ID 34105; INTERNAL_ERROR; received from peer"), true},
		{apierrors.NewTimeoutError("request did not complete within requested timeout", 0), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("boom")), true},
		{apierrors.NewResourceExpired("continue token expired"), true},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewBadRequest("bad"), false},
	} {
		if got := retriable(c.err); got != c.want {
			t.Errorf("retriable(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}
