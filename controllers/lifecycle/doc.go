// Package lifecycle enforces hyperbatch's lifecycle annotations on the workloads hyperbatch serves:
//
//   - hyperbatch.dev/active-deadline-seconds on HyperJobs, JobSets and Volcano Jobs: once a workload
//     has been running (not suspended) that long, it is ended with reason DeadlineExceeded;
//   - hyperbatch.dev/ttl-seconds-after-finished on HyperJobs: a finished HyperJob is deleted
//     (foreground) that long after its terminal condition's lastTransitionTime. JobSets and Volcano
//     Jobs carry a native spec.ttlSecondsAfterFinished that their own controllers enforce; this
//     package only counts those deletions in its metrics.
//
// Every due time is computed from timestamps stored on the object (creationTimestamp, condition
// lastTransitionTimes, and the annotations this package writes before it acts), never from memory,
// so a restarted manager performs each action once and on time. See docs/lifecycle.md.
package lifecycle
