package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// The benchmarks' cleanup between runs. No namespace controller, garbage collector or kubelet runs
// here, so the harness deletes what a run created.

const (
	// cleanupPage is how many pods one DeleteCollection request deletes.
	cleanupPage = 200
	// cleanupAttempts is how many failed requests in a row a cleanup step takes before it gives up.
	cleanupAttempts = 5
	// cleanupWait bounds the wait until the namespace holds no pod.
	cleanupWait = 2 * time.Minute
)

// deleteAllPods deletes every pod of the namespace (grace period 0) and waits until none is left.
//
// It deletes them a page at a time: each DeleteCollection request carries limit=cleanupPage and the
// continue token of the page before (the API server then lists that one page, deletes its pods
// and answers with the page and the next token). Each request is retried on a transient
// failure (retriable), up to cleanupAttempts times in a row.
//
// Why: a single DeleteCollection of the whole namespace does all the deleting inside one request
// (one API server worker deleting pod after pod), and its answer is the list of every deleted pod,
// while the API server gives each request 60 s (--request-timeout). At 5,000 nodes on the shared
// machine such a request failed with "stream error: stream ID …; INTERNAL_ERROR; received from peer",
// and the benchmark failed in its cleanup, after its runs had been measured. The API server's
// timeout filter answers 504 when the deadline passes before the answer has begun, and resets the
// HTTP/2 stream (INTERNAL_ERROR) when it passes after. A rerun with the API server's log (1,344
// pods, load average 7-8, the control plane at nice 19) showed the one request taking 16 s and 19 s;
// the failed run had a load average of 11-16. A page bounds the work and the answer of one request,
// and a retry turns a lost request into a repeat: deleting a page twice is harmless.
func deleteAllPods(ctx context.Context, cs kubernetes.Interface, ns string) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	cont := ""
	for pages := 1; ; pages++ {
		var next string
		err := retrying(ctx, fmt.Sprintf("deleting page %d of the pods of namespace %s", pages, ns), func(ctx context.Context) error {
			var page corev1.PodList
			err := cs.CoreV1().RESTClient().Delete().Namespace(ns).Resource("pods").
				VersionedParams(&metav1.ListOptions{Limit: cleanupPage, Continue: cont}, scheme.ParameterCodec).
				Body(&opts).Do(ctx).Into(&page)
			if apierrors.IsResourceExpired(err) {
				cont = "" // the token outlived etcd's compaction: start over from the first page
			}
			next = page.Continue
			return err
		})
		if err != nil {
			return err
		}
		if next == "" {
			break
		}
		cont = next
	}
	// Pods with finalizers (a Job's tracking finalizer) stay until their controller removes them.
	var last error // the last failed List: the wait goes on through them
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, cleanupWait, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		last = err
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("pods of namespace %s still there %s after they were deleted: %w", ns, cleanupWait, err), last)
	}
	return nil
}

// retrying runs f until it succeeds, fails with an error that is not retriable, or has failed
// cleanupAttempts times in a row; the error names what failed and how often.
func retrying(ctx context.Context, what string, f func(context.Context) error) error {
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil || !retriable(err):
			return fmt.Errorf("%s: %w", what, err)
		case attempt == cleanupAttempts:
			return fmt.Errorf("%s: failed %d times in a row, the last: %w", what, attempt, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, errors.Join(ctx.Err(), err))
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// retriable tells a failure worth repeating the request for: an answer that says so (429, a
// timeout, an expired continue token, a server error) or no answer at all (a reset HTTP/2 stream,
// a closed connection). A refusal (400, 403, 404, 409, 422) is not.
func retriable(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError ||
			apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsResourceExpired(err)
	}
	return true
}
