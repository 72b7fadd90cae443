// The deep copy functions of this package are generated: `make generate` runs
// controller-gen object on it (zz_generated.deepcopy.go).
// +kubebuilder:object:generate=true

package args
