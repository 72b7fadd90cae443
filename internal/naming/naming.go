// Package naming names the objects hyperbatch makes from a HyperJob. The webhook checks the names
// at admission and the HyperJob controller creates the objects; both use this package, so the
// rule the webhook enforces is exactly the rule the controller relies on.
package naming

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxChildJobNameLength is Volcano's limit on a Job name (its admission webhook requires a name of
// at most 63 characters); every child name must fit it.
const MaxChildJobNameLength = validation.DNS1123LabelMaxLength

// ChildJobName is the name of the index-th child Volcano Job (and of its PropagationPolicy) of a
// HyperJob's replicatedJob: {hyperjob}-{replicatedjob}-{index}.
func ChildJobName(hyperJob, replicatedJob string, index int) string {
	return hyperJob + "-" + replicatedJob + "-" + strconv.Itoa(index)
}

// CheckChildJobNames checks the names of the first count children of a replicatedJob: the longest,
// the last one, must be a DNS subdomain of at most MaxChildJobNameLength characters. It returns nil
// when count is 0 or every name is valid, otherwise an error saying which name fails and what to
// shorten.
func CheckChildJobNames(hyperJob, replicatedJob string, count int) error {
	if count <= 0 {
		return nil
	}
	longest := ChildJobName(hyperJob, replicatedJob, count-1)
	if over := len(longest) - MaxChildJobNameLength; over > 0 {
		return fmt.Errorf("the Volcano Jobs made from this replicatedJob are named {hyperjob}-{replicatedjob}-{index}; the longest, %q, is %d characters, "+
			"more than %d: shorten the HyperJob name (%d characters) or the replicatedJob name (%d characters) by %d",
			longest, len(longest), MaxChildJobNameLength, len(hyperJob), len(replicatedJob), over)
	}
	if errs := validation.IsDNS1123Subdomain(longest); len(errs) > 0 {
		return fmt.Errorf("the Volcano Jobs made from this replicatedJob are named {hyperjob}-{replicatedjob}-{index}; %q is not a valid Volcano Job name: %s",
			longest, strings.Join(errs, "; "))
	}
	return nil
}

// MaxChildren bounds the number of child Volcano Jobs of one HyperJob (the sum over its
// replicatedJobs of replicas × children per replica). The webhook refuses a HyperJob beyond it and
// the controller checks it again, before it builds anything per child, so no spec can make the
// manager allocate or write in proportion to an arbitrary number.
//
// Why 5,000 (docs/hyperjob.md, "Bounds"): the HyperJob's status holds one jobStates entry per child,
// measured at 93 bytes with typical names and 132 bytes with names of the longest allowed length
// (controllers/hyperjob TestStatusSizeAtMaxChildren), so 5,000 children keep the status near
// 0.63 MiB, under half of etcd's 1.5 MiB object limit, with room for the spec and longer messages.
// The controller's plan costs about 2.3 KB per child, 11.5 MB at the limit (BenchmarkBuildPlan),
// well inside the manager's 512 MiB.
const MaxChildren = 5000

// CheckChildCount refuses a total number of children above MaxChildren, with a message naming
// what was counted (e.g. "the sum of spec.replicatedJobs[*].replicas").
func CheckChildCount(total int64, counted string) error {
	if total <= MaxChildren {
		return nil
	}
	return fmt.Errorf("the HyperJob would have %d child jobs (%s), more than the limit of %d per HyperJob: "+
		"split the work over several HyperJobs or lower the replicas", total, counted, MaxChildren)
}
