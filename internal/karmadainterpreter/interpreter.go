// Package karmadainterpreter holds the ResourceInterpreterCustomization hyperbatch installs on a
// Karmada control plane, and installs it.
//
// Karmada updates a member's copy of a propagated object from its template on the control plane
// whenever it re-applies the Work (the template changed, or Karmada saw the member's copy differ
// from the version it recorded). For a Volcano Job that update carries the template's spec, which
// lacks the defaults the member's Volcano webhook filled in at creation, and Volcano's validating
// webhook refuses it ("job updates may not change fields other than minAvailable, tasks[*].replicas
// under spec and PriorityClassName"). The Work then stays not Applied and Karmada reflects no status
// from that member: the plane's child, and its HyperJob, miss the member's progress and end.
//
// Karmada's built-in interpreter for batch.volcano.sh/v1alpha1 Job (its thirdparty
// customizations) has health, components, status reflection and aggregation, but no retention.
// VolcanoJobRetention adds only that operation; Karmada picks each operation from the first
// interpreter that has it, so the built-in status scripts keep working.
package karmadainterpreter

import (
	"context"
	_ "embed"
	"fmt"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RetentionScript is the Lua Retain function of VolcanoJobRetention.
//
//go:embed volcanojob_retention.lua
var RetentionScript string

const (
	// Name is the name of the ResourceInterpreterCustomization hyperbatch installs.
	Name = "hyperbatch-volcano-job-retention"
	// FieldOwner is the field manager of its server-side apply.
	FieldOwner = "hyperbatch-karmada-interpreter"

	volcanoJobAPIVersion = "batch.volcano.sh/v1alpha1"
	volcanoJobKind       = "Job"
)

var gvk = configv1alpha1.SchemeGroupVersion.WithKind("ResourceInterpreterCustomization")

// VolcanoJobRetention is the customization: a retention for batch.volcano.sh/v1alpha1 Job that keeps
// the member's spec except the fields Volcano lets an update change (volcanojob_retention.lua).
func VolcanoJobRetention() *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:   Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "hyperbatch"},
		},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: volcanoJobAPIVersion, Kind: volcanoJobKind},
			Customizations: configv1alpha1.CustomizationRules{
				Retention: &configv1alpha1.LocalValueRetention{LuaScript: RetentionScript},
			},
		},
	}
}

// Ensure installs VolcanoJobRetention on the Karmada apiserver c talks to (server-side apply, so a
// changed script replaces the installed one). When another ResourceInterpreterCustomization already
// gives Volcano Jobs a retention, Karmada's webhook would refuse a second one: Ensure leaves that
// one in charge and reports its name in skippedFor.
func Ensure(ctx context.Context, c client.Client) (skippedFor string, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list); err != nil {
		return "", fmt.Errorf("listing Karmada's ResourceInterpreterCustomizations: %w", err)
	}
	for i := range list.Items {
		var ric configv1alpha1.ResourceInterpreterCustomization
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &ric); err != nil {
			return "", fmt.Errorf("reading ResourceInterpreterCustomization %s: %w", list.Items[i].GetName(), err)
		}
		t := ric.Spec.Target
		if ric.Name != Name && t.APIVersion == volcanoJobAPIVersion && t.Kind == volcanoJobKind && ric.Spec.Customizations.Retention != nil {
			return ric.Name, nil
		}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(VolcanoJobRetention())
	if err != nil {
		return "", fmt.Errorf("encoding ResourceInterpreterCustomization %s: %w", Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying ResourceInterpreterCustomization %s (config.karmada.io/v1alpha1; the identity needs create and patch on resourceinterpretercustomizations): %w", Name, err)
	}
	return "", nil
}
