// Package scheme builds the runtime.Scheme shared by hyperbatch's binaries and tests: core Kubernetes
// types, hyperbatch's own API and the upstream APIs hyperbatch reads and writes (Volcano, Karmada, JobSet).
package scheme

import (
	karmadaclusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadapolicyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaworkv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hyperbatchv1alpha1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// New returns a scheme with every API group hyperbatch uses registered.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		hyperbatchv1alpha1.AddToScheme,
		batchv1alpha1.AddToScheme,
		busv1alpha1.AddToScheme,
		schedulingv1beta1.AddToScheme,
		topologyv1alpha1.AddToScheme,
		trainingv1alpha1.AddToScheme,
		karmadaclusterv1alpha1.Install,
		karmadapolicyv1alpha1.Install,
		karmadaclusterv1alpha1.Install,
		karmadaworkv1alpha2.Install,
		jobsetv1alpha2.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}
