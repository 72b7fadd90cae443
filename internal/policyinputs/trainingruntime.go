package policyinputs

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// TrainingRuntime reads the runtime a TrainJob references (spec.runtimeRef; kind
// ClusterTrainingRuntime when unset, TrainingRuntime in the TrainJob's namespace otherwise). It
// returns nil, and no error, when the TrainJob names none, or the runtime or Trainer's API does not
// exist (Trainer refuses such a TrainJob itself).
func TrainingRuntime(ctx context.Context, r client.Reader, tj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name, _, _ := unstructured.NestedString(tj.Object, "spec", "runtimeRef", "name")
	kind, _, _ := unstructured.NestedString(tj.Object, "spec", "runtimeRef", "kind")
	if name == "" || r == nil {
		return nil, nil
	}
	if kind == "" {
		kind = "ClusterTrainingRuntime"
	}
	rt := &unstructured.Unstructured{}
	rt.SetGroupVersionKind(defaults.TrainJobGVK.GroupVersion().WithKind(kind))
	key := client.ObjectKey{Name: name}
	if kind == "TrainingRuntime" {
		key.Namespace = tj.GetNamespace()
	}
	if err := r.Get(ctx, key, rt); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s, the runtime of TrainJob %s/%s: %w", kind, key, tj.GetNamespace(), tj.GetName(), err)
	}
	return rt, nil
}

// TrainerMakesPodGroup reports whether a TrainingRuntime makes Kubeflow Trainer create the
// TrainJob's Volcano PodGroup itself (spec.podGroupPolicy.volcano).
func TrainerMakesPodGroup(rt *unstructured.Unstructured) bool {
	if rt == nil {
		return false
	}
	_, found, _ := unstructured.NestedFieldNoCopy(rt.Object, "spec", "podGroupPolicy", "volcano")
	return found
}
