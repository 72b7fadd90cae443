package defaults

import (
	"reflect"
	"testing"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func TestNormalizeQueue(t *testing.T) {
	tests := map[string]string{
		"":                   "",
		"  ":                 "",
		" team-a ":           "team-a",
		"namespace/batch":    "namespace/batch",
		" namespace/ batch ": "namespace/batch",
		"namespace/":         "namespace/",
		"team-a/gpu":         "team-a/gpu",
		"default":            "default",
	}
	for in, want := range tests {
		if got := NormalizeQueue(in); got != want {
			t.Errorf("NormalizeQueue(%q) = %q, want %q", in, got, want)
		}
		if again := NormalizeQueue(NormalizeQueue(in)); again != want {
			t.Errorf("NormalizeQueue not idempotent on %q: %q", in, again)
		}
	}
}

func TestSplitQueue(t *testing.T) {
	for _, tc := range []struct {
		in         string
		name       string
		namespaced bool
	}{
		{"gpu", "gpu", false},
		{"namespace/gpu", "gpu", true},
		{" namespace/ gpu ", "gpu", true},
	} {
		name, namespaced := SplitQueue(tc.in)
		if name != tc.name || namespaced != tc.namespaced {
			t.Errorf("SplitQueue(%q) = %q, %v; want %q, %v", tc.in, name, namespaced, tc.name, tc.namespaced)
		}
	}
}

func TestAllowedQueue(t *testing.T) {
	withList := func(list ...string) hbv1.WorkloadPolicy {
		p := teamA()
		p.Spec.AllowedQueues = list
		return p
	}
	tests := []struct {
		name        string
		pols        []hbv1.WorkloadPolicy
		ns          Namespace
		queue       string
		wantAllowed bool
		wantPolicy  string
		wantList    []string
	}{
		{"no governing policy", []hbv1.WorkloadPolicy{teamA()}, Namespace{Name: "b"}, "anything", true, "", nil},
		{"policy without allowedQueues", []hbv1.WorkloadPolicy{withList()}, nsA, "anything", true, "team-a", nil},
		{"listed queue", []hbv1.WorkloadPolicy{teamA()}, nsA, " shared ", true, "team-a", []string{"team-a", "shared"}},
		{"unlisted queue", []hbv1.WorkloadPolicy{teamA()}, nsA, "other", false, "team-a", []string{"team-a", "shared"}},
		{"NamespaceQueue is not the cluster Queue of the same name", []hbv1.WorkloadPolicy{teamA()}, nsA, "namespace/shared",
			false, "team-a", []string{"team-a", "shared"}},
		{"NamespaceQueue listed", []hbv1.WorkloadPolicy{withList("namespace/ batch")}, nsA, "namespace/batch",
			true, "team-a", []string{"namespace/ batch"}},
		{"empty queue is Volcano's default queue: rejected", []hbv1.WorkloadPolicy{teamA()}, nsA, "", false, "team-a", []string{"team-a", "shared"}},
		{"empty queue is Volcano's default queue: allowed", []hbv1.WorkloadPolicy{withList("default")}, nsA, "", true, "team-a", []string{"default"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allowed, pol, list := AllowedQueue(tc.queue, tc.ns, mustPolicies(t, tc.pols...))
			if allowed != tc.wantAllowed || pol != tc.wantPolicy || !reflect.DeepEqual(list, tc.wantList) {
				t.Errorf("AllowedQueue(%q) = %v, %q, %q; want %v, %q, %q", tc.queue, allowed, pol, list, tc.wantAllowed, tc.wantPolicy, tc.wantList)
			}
		})
	}
}
