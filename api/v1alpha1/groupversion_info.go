// Package v1alpha1 holds hyperbatch's own API, group hyperbatch.dev, version v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=hyperbatch.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "hyperbatch.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	//nolint:staticcheck // SA1019: controller-runtime's scheme.Builder, as kubebuilder scaffolds it; moving to
	// runtime.SchemeBuilder changes the API package's registration, left for its own change.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
