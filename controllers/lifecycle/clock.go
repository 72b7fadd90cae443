package lifecycle

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// seconds reads a lifecycle annotation as a number of seconds. ok is false when the annotation is
// absent; err is set when it is present but not an integer >= min (the webhook rejects such values;
// an object admitted without the webhook gets a Warning Event instead of an action).
func seconds(obj metav1.Object, key string, min int64) (d time.Duration, ok bool, err error) {
	v, has := obj.GetAnnotations()[key]
	if !has {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || n < min {
		return 0, true, fmt.Errorf("annotation %s=%q is not an integer number of seconds >= %d; fix it by recreating the object with a valid value", key, v, min)
	}
	// Cap far beyond any real deadline so the multiplication cannot overflow.
	const maxSeconds = int64(100 * 365 * 24 * 3600)
	return time.Duration(min64(n, maxSeconds)) * time.Second, true, nil
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// ActiveDeadline is the workload's hyperbatch.dev/active-deadline-seconds (>= 1).
func ActiveDeadline(obj metav1.Object) (time.Duration, bool, error) {
	return seconds(obj, hbv1.ActiveDeadlineSecondsAnnotation, 1)
}

// TTLAfterFinished is the workload's hyperbatch.dev/ttl-seconds-after-finished (>= 0).
func TTLAfterFinished(obj metav1.Object) (time.Duration, bool, error) {
	return seconds(obj, hbv1.TTLSecondsAfterFinishedAnnotation, 0)
}
