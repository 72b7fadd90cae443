package defaults

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// policy builds a WorkloadPolicy; mutate edits its spec.
func policy(name string, weight int32, mutate func(*hbv1.WorkloadPolicySpec)) hbv1.WorkloadPolicy {
	p := hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hbv1.WorkloadPolicySpec{Weight: weight}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// teamA is the shared policy with every default set, governing namespaces labelled team=a.
func teamA() hbv1.WorkloadPolicy { return *builders.TeamA().Obj() }

func mustPolicies(t testing.TB, list ...hbv1.WorkloadPolicy) *Policies {
	t.Helper()
	p, err := NewPolicies(list)
	if err != nil {
		t.Fatalf("NewPolicies: %v", err)
	}
	return p
}

// nsA is a namespace governed by teamA.
var nsA = Namespace{Name: "a", Labels: map[string]string{"team": "a"}}

// nsML is a namespace governed by teamA that also carries Volcano's queue annotation "ml-queue".
var nsML = Namespace{Name: "ml", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{QueueNameAnnotation: "ml-queue"}}

// wantResult is an expected Result: the governing policy, the filled paths in order and the
// defaulted-by value.
type wantResult struct {
	Policy      string
	Fields      []string
	DefaultedBy string
}

// checkResult compares a Result with the expected one, and checks that every Fill names its
// short field and that defaulted-by records each Fill's source and field.
func checkResult(t *testing.T, got Result, want wantResult) {
	t.Helper()
	assert.Equal(t, want.Policy, got.Policy, "Result.Policy")
	assert.Equal(t, want.DefaultedBy, got.DefaultedBy, "Result.DefaultedBy")
	wantPaths := want.Fields
	if wantPaths == nil {
		wantPaths = []string{}
	}
	assert.Equal(t, wantPaths, got.Paths(), "paths of Result.Fills")
	recorded := parseDefaultedBy(got.DefaultedBy)
	for _, f := range got.Fills {
		assert.Contains(t, fieldOrder, f.Field, "Fill %s: unknown short field name", f.Path)
		assert.True(t, recorded.has(f.Source.String(), f.Field), "Fill %+v missing from defaulted-by %q", f, got.DefaultedBy)
	}
}

// checkObject compares the defaulted object with the expected one.
func checkObject(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("object mismatch (-want +got):\n%s", diff.Diff(want, got))
	}
}

// applyOnce applies the engine to a copy of before, checks that applying it again changes nothing
// and that Result.Changed agrees with the object, and returns the defaulted copy and its Result.
func applyOnce[T any](t *testing.T, before T, deepCopy func(T) T, apply func(T) Result) (T, Result) {
	t.Helper()
	once := deepCopy(before)
	res := apply(once)
	checkIdempotent(t, once, deepCopy, apply)
	if res.Changed() == reflect.DeepEqual(before, once) {
		t.Fatalf("Result.Changed()=%v disagrees with the object", res.Changed())
	}
	return once, res
}

// checkIdempotent applies again to an already defaulted object and expects nothing to change.
func checkIdempotent[T any](t *testing.T, once T, deepCopy func(T) T, apply func(T) Result) {
	t.Helper()
	twice := deepCopy(once)
	res := apply(twice)
	if res.Changed() || res.DefaultedBy != "" {
		t.Errorf("second application changed something: %+v", res)
	}
	if !reflect.DeepEqual(once, twice) {
		t.Errorf("second application not idempotent (-once +twice):\n%s", diff.Diff(once, twice))
	}
}

// has reports whether the value names field under source.
func (p provenance) has(source, field string) bool {
	for _, e := range p.entries {
		if e.source == source {
			return slices.Contains(e.fields, field)
		}
	}
	return false
}
