// Package workload is the kind registry: one row per kind hyperbatch serves, one file per kind,
// saying how the kind is admitted, whether it is a gang and who makes its PodGroup, when it
// started, finished or is suspended and how it is ended at a deadline, where its TTL lives, and how
// the CLI names it. The webhook set-up, the lifecycle controller, the JobSet gang controller, the
// policy admission mode and `kubectl hyperbatch why`/`explain` read these rows instead of switching
// on kinds; docs/design.md, "Adding a kind", lists the steps.
//
// The package is pure: no clients, no I/O, no package state beyond the table.
package workload

import (
	"slices"
	"strings"
	"time"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Object is a Kubernetes object (every client.Object is one).
type Object = defaults.Object

// Workload is one row of the registry.
type Workload struct {
	// Kind names the row; it is also the kind's row of the defaults engine's kind table
	// (defaults.LookupKind), which holds its GVK, resource, webhook paths and engine function.
	Kind defaults.Kind
	// Title is the kind as people read it ("Volcano Job").
	Title string
	// Admission is how hyperbatch admits the kind.
	Admission Admission
	// Gang is nil when the kind is not scheduled as one gang of its own.
	Gang *Gang
	// Lifecycle is nil when the lifecycle controller does not serve the kind.
	Lifecycle *Lifecycle
	// CLI is how kubectl-hyperbatch names the kind.
	CLI CLI
}

// Admission says how the kind is admitted.
type Admission struct {
	// PolicyFields are the fields the admission policies of --admission=policy fill or check for
	// the kind (internal/admissionpolicy); empty when the kind keeps its webhook in policy mode.
	PolicyFields []string
	// Uncovered says why the kind keeps its webhook in policy mode ("" when PolicyFields is set).
	Uncovered string
}

// PolicyCovered reports whether the admission policies cover the kind.
func (a Admission) PolicyCovered() bool { return len(a.PolicyFields) > 0 }

// Maker is who makes a gang's Volcano PodGroup.
type Maker string

const (
	// MadeByVolcano means Volcano's job controller makes the PodGroup; hyperbatch's PodGroup webhook
	// admits it.
	MadeByVolcano Maker = "Volcano"
	// MadeByHyperbatch means hyperbatch's gang controller (controllers/podgroup) makes the PodGroup.
	MadeByHyperbatch Maker = "hyperbatch"
	// MadeByTrainer means Kubeflow Trainer's Volcano plugin makes the PodGroup (podGroupPolicy.volcano);
	// hyperbatch's PodGroup webhook admits it and controllers/podgroup prices it.
	MadeByTrainer Maker = "Trainer"
)

// Gang says how the kind's PodGroup is shaped and owned.
type Gang struct {
	// MadeBy is who makes the PodGroup.
	MadeBy Maker
	// OwnerAPIVersion and OwnerKind are the PodGroup's controller reference: `why KIND/NAME`
	// finds the PodGroup by it.
	OwnerAPIVersion, OwnerKind string
	// SameName: the PodGroup has the workload's name.
	SameName bool
	// MinMember is what the PodGroup's minMember counts, in words (docs and the CLI).
	MinMember string
	// Via is the kind of the same-named object whose gang the workload's pods are in when it has no
	// PodGroup of its own ("" when there is none): a TrainJob without podGroupPolicy runs as its
	// JobSet's gang. `why KIND/NAME` looks there second.
	Via defaults.Kind
	// SubGroups says, in words, how the kind splits its gang into sub-groups
	// (PodGroup.spec.subGroupPolicy, docs/scheduler.md "Ways in"); "" when it cannot.
	SubGroups string
	// SubGroupAnnotations: the kind's own hyperbatch.dev/subgroup-* annotations ask for sub-groups,
	// and the JobSet gang controller writes them into the PodGroup (controllers/podgroup checks that
	// it serves exactly these rows).
	SubGroupAnnotations bool
}

// Where says where a lifecycle setting lives on an object.
type Where string

const (
	// InAnnotation means hyperbatch's annotation (hyperbatch.dev/active-deadline-seconds,
	// hyperbatch.dev/ttl-seconds-after-finished), which the lifecycle controller enforces.
	InAnnotation Where = "annotation"
	// InNativeField means the kind's own spec field, which its own controller enforces; the lifecycle
	// controller only counts what it does.
	InNativeField Where = "native"
)

// End is how a workload is ended at its deadline.
type End string

const (
	// EndFailedCondition means the lifecycle controller writes the kind's Failed condition with reason
	// DeadlineExceeded; the kind's own controller (or the lifecycle controller, for a HyperJob's
	// children) then stops its pods.
	EndFailedCondition End = "FailedCondition"
	// EndAbortCommand means the lifecycle controller creates a Volcano bus Command AbortJob.
	EndAbortCommand End = "AbortCommand"
)

// Lifecycle says how the lifecycle controller serves the kind (docs/lifecycle.md).
type Lifecycle struct {
	// Deadline and TTL say where the kind's active deadline and TTL after finished live.
	Deadline, TTL Where
	// End is how the deadline ends the workload.
	End End
	// Started is when the deadline clock started; nil while the workload is suspended or finished
	// (no clock runs).
	Started func(Object) *time.Time
	// FinishedAt is when the workload finished (the time its TTL counts from); nil while it runs.
	FinishedAt func(Object) *time.Time
	// Suspended reports whether the workload is suspended.
	Suspended func(Object) bool
	// NativeTTL is spec.ttlSecondsAfterFinished when TTL is InNativeField; nil when unset.
	NativeTTL func(Object) *int32
}

// CLI says how kubectl-hyperbatch names the kind.
type CLI struct {
	// Name is the name the CLI's messages use ("vcjob"); it is one of Names.
	Name string
	// Aliases are short names besides the ones every kind has (Names).
	Aliases []string
	// Why: `kubectl hyperbatch why KIND/NAME` resolves the kind's gang.
	Why bool
	// Explain: `kubectl hyperbatch explain KIND/NAME` explains the kind's defaults.
	Explain bool
}

// typed adapts a function of one concrete type to the rows' Object functions; an object of
// another type gets the zero value.
func typed[T Object, R any](f func(T) R) func(Object) R {
	return func(o Object) R {
		t, ok := o.(T)
		if !ok {
			var zero R
			return zero
		}
		return f(t)
	}
}

// table is in the order of the defaults engine's kind table.
var table = []Workload{pod, volcanoJob, podGroup, jobSet, hyperJob, trainJob, propagationPolicy, workloadPolicy}

// All returns the registry, in the order of the defaults engine's kind table.
func All() []Workload { return slices.Clone(table) }

// Lookup returns the row of kind k.
func Lookup(k defaults.Kind) (Workload, bool) {
	i := slices.IndexFunc(table, func(w Workload) bool { return w.Kind == k })
	if i < 0 {
		return Workload{}, false
	}
	return table[i], true
}

// Names are what a user may type for the kind, lower case: the kind, its resource (plural and
// singular), both qualified by the API group, the bare GVK kind of the core group, and the row's
// aliases. "job" and "jobs" are left out: they would name a Kubernetes Job, which hyperbatch does
// not serve.
func (w Workload) Names() []string {
	spec, _ := defaults.LookupKind(w.Kind)
	names := []string{strings.ToLower(string(w.Kind)), spec.Resource, strings.TrimSuffix(spec.Resource, "s"),
		spec.Resource + "." + spec.GVK.Group, strings.ToLower(spec.GVK.Kind) + "." + spec.GVK.Group}
	if spec.GVK.Group == "" {
		names = append(names, strings.ToLower(spec.GVK.Kind))
	}
	names = append(names, w.CLI.Aliases...)
	names = slices.DeleteFunc(names, func(n string) bool { return n == "job" || n == "jobs" })
	slices.Sort(names)
	return slices.Compact(names)
}

// ByName returns the row a user means by name (Names; case is ignored).
func ByName(name string) (Workload, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, w := range table {
		if slices.Contains(w.Names(), n) {
			return w, true
		}
	}
	return Workload{}, false
}

// WithLifecycle are the rows the lifecycle controller serves, in table order.
func WithLifecycle() []Workload {
	return slices.DeleteFunc(All(), func(w Workload) bool { return w.Lifecycle == nil })
}

// Gangs are the rows whose PodGroup maker is m, in table order.
func Gangs(m Maker) []Workload {
	return slices.DeleteFunc(All(), func(w Workload) bool { return w.Gang == nil || w.Gang.MadeBy != m })
}

// ByPodGroupOwner returns the gang row whose PodGroups are controlled by apiVersion/kind.
func ByPodGroupOwner(apiVersion, kind string) (Workload, bool) {
	for _, w := range table {
		if w.Gang != nil && w.Gang.OwnerKind == kind && w.Gang.OwnerAPIVersion == apiVersion {
			return w, true
		}
	}
	return Workload{}, false
}
