package webhook

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// config/webhook/manifests.yaml is generated from Configurations; it must not drift.
func TestManifestsInSync(t *testing.T) {
	want, err := Manifests(ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "config", "webhook", "manifests.yaml")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `go run ./webhook/cmd/genmanifests`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with webhook.Configurations: run `go run ./webhook/cmd/genmanifests`", path)
	}
}

func TestConfigurations(t *testing.T) {
	mwc, vwc := Configurations(ConfigOptions{URL: "https://127.0.0.1:9443/", CABundle: []byte("CA"), ExcludedNamespaces: []string{"infra"}})
	if mwc.Name != MutatingConfigurationName || vwc.Name != ValidatingConfigurationName {
		t.Fatalf("names %q %q", mwc.Name, vwc.Name)
	}
	if len(mwc.Webhooks) != 18 || len(vwc.Webhooks) != 16 {
		t.Fatalf("%d mutating, %d validating webhooks; want 18 (a CREATE and an UPDATE entry for 7 kinds, for the self-declared-gang JobSets and for the Volcano Job PodGroups of ungoverned namespaces) and 16 (the same for 8 kinds but no Pod CREATE: the mutating webhook judges it; and the JobSet pods' PodGroup gate)", len(mwc.Webhooks), len(vwc.Webhooks))
	}
	for _, e := range vwc.Webhooks {
		if e.Name == EntryName(KindPod, false) {
			t.Errorf("%s: a Pod CREATE makes one call, to %s", e.Name, EntryName(KindPod, true))
		}
	}
	paths := map[string]string{}
	check := func(name string, cc admissionregistrationv1.WebhookClientConfig, fp *admissionregistrationv1.FailurePolicyType, se *admissionregistrationv1.SideEffectClass,
		mp *admissionregistrationv1.MatchPolicyType, ns *metav1.LabelSelector, versions []string) {
		t.Helper()
		if cc.URL == nil || cc.Service != nil || string(cc.CABundle) != "CA" {
			t.Errorf("%s: client config %+v", name, cc)
		} else {
			paths[name] = *cc.URL
		}
		wantFP := admissionregistrationv1.Fail
		if slices.Contains([]string{EntryName(KindPod, true), EntryName(KindPod, false), UpdateEntryName(KindPod, true), UpdateEntryName(KindPod, false),
			JobSetPodGateEntryName, EntryName(KindWorkloadPolicy, false), UpdateEntryName(KindWorkloadPolicy, false)}, name) {
			wantFP = admissionregistrationv1.Ignore
		}
		if *fp != wantFP || *se != admissionregistrationv1.SideEffectClassNone || *mp != admissionregistrationv1.Equivalent ||
			len(versions) != 1 || versions[0] != "v1" {
			t.Errorf("%s: failurePolicy %s sideEffects %s matchPolicy %s versions %v", name, *fp, *se, *mp, versions)
		}
		if name == EntryName(KindWorkloadPolicy, false) || name == UpdateEntryName(KindWorkloadPolicy, false) {
			if ns != nil {
				t.Errorf("%s: a cluster-scoped kind with a namespaceSelector %+v", name, ns)
			}
			return
		}
		ex := ns.MatchExpressions[0]
		if ex.Key != "kubernetes.io/metadata.name" || ex.Operator != metav1.LabelSelectorOpNotIn ||
			len(ex.Values) != 3 || ex.Values[0] != "kube-system" || ex.Values[1] != DefaultNamespace || ex.Values[2] != "infra" {
			t.Errorf("%s: namespaceSelector %+v", name, ns)
		}
	}
	for _, w := range mwc.Webhooks {
		check(w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.NamespaceSelector, w.AdmissionReviewVersions)
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v", w.Name, w.ReinvocationPolicy)
		}
	}
	for _, w := range vwc.Webhooks {
		check(w.Name, w.ClientConfig, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.NamespaceSelector, w.AdmissionReviewVersions)
	}
	// CREATE entries have no match condition (the apiserver would convert every object to evaluate
	// it); UPDATE entries see only UPDATEs that change spec or annotations. Workload entries skip
	// namespaces the namespacelabel controller marked ungoverned.
	disabled := metav1.LabelSelectorRequirement{Key: hbv1.PodWebhookLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{hbv1.PodWebhookLabelDisabled}}
	type entry struct {
		name  string
		ops   []admissionregistrationv1.OperationType
		conds []admissionregistrationv1.MatchCondition
		ns    *metav1.LabelSelector
		scope admissionregistrationv1.ScopeType
	}
	var entries []entry
	for _, w := range mwc.Webhooks {
		entries = append(entries, entry{w.Name, w.Rules[0].Operations, w.MatchConditions, w.NamespaceSelector, *w.Rules[0].Scope})
	}
	for _, w := range vwc.Webhooks {
		entries = append(entries, entry{w.Name, w.Rules[0].Operations, w.MatchConditions, w.NamespaceSelector, *w.Rules[0].Scope})
	}
	changed := admissionregistrationv1.MatchCondition{Name: MatchConditionName, Expression: matchConditionExpression}
	gang := admissionregistrationv1.MatchCondition{Name: selfDeclaredGangMatchName, Expression: selfDeclaredGangExpression}
	unbound := admissionregistrationv1.MatchCondition{Name: unboundTopologyMatchName, Expression: unboundTopologyExpression}
	names := map[string]bool{}
	for _, e := range entries {
		if names[e.name] {
			t.Errorf("entry %s twice", e.name)
		}
		names[e.name] = true
		update := strings.Contains(e.name, "-update.")
		wantOps := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
		if update {
			wantOps = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
		}
		if !slices.Equal(e.ops, wantOps) {
			t.Errorf("%s: operations %v, want %v", e.name, e.ops, wantOps)
		}
		switch e.name {
		case JobSetPodGateEntryName:
			// CREATE only; every non-excluded namespace, governed or not.
			if len(e.conds) != 0 || len(e.ns.MatchExpressions) != 1 {
				t.Errorf("%s: matchConditions %+v namespaceSelector %+v", e.name, e.conds, e.ns)
			}
			continue
		case JobSetGangEntryName, JobSetGangUpdateEntryName:
			// Only ungoverned namespaces, and only JobSets that are gangs on their own.
			in := metav1.LabelSelectorRequirement{Key: hbv1.PodWebhookLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{hbv1.PodWebhookLabelDisabled}}
			want := []admissionregistrationv1.MatchCondition{gang}
			if update {
				want = []admissionregistrationv1.MatchCondition{changed, gang}
			}
			if !slices.Equal(e.conds, want) || len(e.ns.MatchExpressions) != 2 || !equality(e.ns.MatchExpressions[1], in) {
				t.Errorf("%s: matchConditions %+v namespaceSelector %+v", e.name, e.conds, e.ns)
			}
			continue
		case VolcanoJobPodGroupEntryName, VolcanoJobPodGroupUpdateEntryName:
			// Only ungoverned namespaces, and only a Volcano Job's PodGroup whose topology has no tier.
			in := metav1.LabelSelectorRequirement{Key: hbv1.PodWebhookLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{hbv1.PodWebhookLabelDisabled}}
			want := []admissionregistrationv1.MatchCondition{unbound}
			if update {
				want = []admissionregistrationv1.MatchCondition{changed, unbound}
			}
			if !slices.Equal(e.conds, want) || len(e.ns.MatchExpressions) != 2 || !equality(e.ns.MatchExpressions[1], in) {
				t.Errorf("%s: matchConditions %+v namespaceSelector %+v", e.name, e.conds, e.ns)
			}
			continue
		}
		if update && !slices.Equal(e.conds, []admissionregistrationv1.MatchCondition{changed}) || !update && len(e.conds) != 0 {
			t.Errorf("%s: matchConditions %+v", e.name, e.conds)
		}
		switch e.name {
		case EntryName(KindPod, true), EntryName(KindPod, false), UpdateEntryName(KindPod, true), UpdateEntryName(KindPod, false):
		case EntryName(KindWorkloadPolicy, false), UpdateEntryName(KindWorkloadPolicy, false):
			if e.scope != admissionregistrationv1.ClusterScope {
				t.Errorf("%s: scope %s", e.name, e.scope)
			}
		default:
			if got := e.ns.MatchExpressions; len(got) != 2 || !equality(got[1], disabled) {
				t.Errorf("%s: namespaceSelector %+v, want the exclusions and %+v", e.name, e.ns, disabled)
			}
		}
	}
	for _, name := range []string{"pod.mutate.hyperbatch.dev", "pod-update.mutate.hyperbatch.dev"} {
		if got := paths[name]; got != "https://127.0.0.1:9443/mutate-pod" {
			t.Errorf("%s URL %q", name, got)
		}
	}
	if got := paths["hyperjob.validate.hyperbatch.dev"]; got != "https://127.0.0.1:9443/validate-hyperjob" {
		t.Errorf("hyperjob URL %q", got)
	}
	pod := mwc.Webhooks[0]
	if pod.NamespaceSelector.MatchLabels[hbv1.PodWebhookLabel] != hbv1.PodWebhookLabelEnabled || pod.ObjectSelector == nil ||
		*pod.TimeoutSeconds != PodTimeoutSeconds {
		t.Errorf("pod webhook %+v", pod)
	}

	// Service mode, a subset of kinds, an opt-out-style Pod selector.
	mwc, vwc = Configurations(ConfigOptions{Kinds: []Kind{KindPod, KindPropagationPolicy}, PodNamespaceSelector: &metav1.LabelSelector{}})
	if len(mwc.Webhooks) != 4 || len(vwc.Webhooks) != 3 {
		t.Fatalf("kinds subset: %d mutating, %d validating", len(mwc.Webhooks), len(vwc.Webhooks))
	}
	svc := mwc.Webhooks[2].ClientConfig.Service
	if svc == nil || svc.Namespace != DefaultNamespace || svc.Name != DefaultServiceName || *svc.Port != DefaultServicePort || *svc.Path != MutatePropagationPolicyPath {
		t.Errorf("service %+v", svc)
	}
	if len(mwc.Webhooks[0].NamespaceSelector.MatchLabels) != 0 {
		t.Errorf("empty pod selector still opts in by label: %+v", mwc.Webhooks[0].NamespaceSelector)
	}
}

func equality(a, b metav1.LabelSelectorRequirement) bool {
	return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
}
