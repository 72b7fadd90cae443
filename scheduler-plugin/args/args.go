// Package args holds HyperTopologyArgs, the configuration of the HyperTopology scheduler plugin, and
// registers it in kube-scheduler's configuration scheme (group kubescheduler.config.k8s.io, versions
// v1 and internal) so that a KubeSchedulerConfiguration passed with --config decodes, defaults and
// converts it like an in-tree plugin's args:
//
//	pluginConfig:
//	  - name: HyperTopology
//	    args:
//	      permitTimeoutSeconds: 60
//	      maxCandidatesPerTier: 64
//	      scoreWeights: {locality: 2, leafFill: 1}
//	      waitForEnqueue: true
//
// The same Go type serves both versions (the fields are identical), so no conversion functions are
// needed. The plugin also accepts args that arrive undecoded (*runtime.Unknown), e.g. from schedulers
// built without this package's scheme registration; see FromObject.
package args

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// PluginName is the scheduler plugin these args configure; the args kind is PluginName + "Args".
const PluginName = "HyperTopology"

// Kind is the args kind.
const Kind = PluginName + "Args"

// Defaults.
const (
	DefaultPermitTimeoutSeconds int32 = 60
	DefaultMaxCandidatesPerTier int32 = 64
	DefaultLocalityWeight       int32 = 2
	DefaultLeafFillWeight       int32 = 1
	// MaxPermitTimeoutSeconds bounds how long reserved resources may be held for an incomplete gang.
	// It is kube-scheduler's own cap on a Permit wait (15 minutes, framework runtime maxTimeout): a
	// longer value would be cut to 15 minutes silently.
	MaxPermitTimeoutSeconds int32 = 900
	MaxWeight               int32 = 100
)

// HyperTopologyArgs configures the HyperTopology plugin.
//
// +kubebuilder:object:root=true
type HyperTopologyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PermitTimeoutSeconds is how long a gang's reserved pods wait at Permit for the rest of the gang
	// (minMember pods) before all of them are released. Default 60, at most 900 (kube-scheduler's
	// limit on a Permit wait).
	PermitTimeoutSeconds *int32 `json:"permitTimeoutSeconds,omitempty"`
	// MaxCandidatesPerTier bounds how many HyperNodes of one tier get a detailed packing check when the
	// gang's pods differ in size (identical pods need none). Default 64.
	MaxCandidatesPerTier *int32 `json:"maxCandidatesPerTier,omitempty"`
	// ScoreWeights weigh the plugin's node score components.
	ScoreWeights *ScoreWeights `json:"scoreWeights,omitempty"`
	// WaitForEnqueue holds a gang's pods until a PodGroup lifecycle controller has enqueued its
	// PodGroup: a PodGroup with no phase yet is held like a Pending one, as Volcano's scheduler
	// treats it. Default true: hyperbatch's manager (controller podgroupstatus) enqueues the
	// PodGroups of hyperbatch-scheduler's gangs. Set false only where no such controller runs; gangs
	// are then placed as soon as their pods exist, and queue capability is not enforced for
	// PodGroups without a phase.
	WaitForEnqueue *bool `json:"waitForEnqueue,omitempty"`
}

// ScoreWeights weigh the score components (0..100 each).
type ScoreWeights struct {
	// Locality favours nodes close (low common tier) to the nodes the gang already holds. Default 2.
	Locality *int32 `json:"locality,omitempty"`
	// LeafFill favours nodes whose lowest HyperNode has room for more of the gang, so that a gang that
	// spans several leaves uses as few as possible. Default 1.
	LeafFill *int32 `json:"leafFill,omitempty"`
}

// SetDefaults fills unset fields.
func SetDefaults(a *HyperTopologyArgs) {
	if a.PermitTimeoutSeconds == nil {
		v := DefaultPermitTimeoutSeconds
		a.PermitTimeoutSeconds = &v
	}
	if a.MaxCandidatesPerTier == nil {
		v := DefaultMaxCandidatesPerTier
		a.MaxCandidatesPerTier = &v
	}
	if a.ScoreWeights == nil {
		a.ScoreWeights = &ScoreWeights{}
	}
	if a.WaitForEnqueue == nil {
		v := true
		a.WaitForEnqueue = &v
	}
	if a.ScoreWeights.Locality == nil {
		v := DefaultLocalityWeight
		a.ScoreWeights.Locality = &v
	}
	if a.ScoreWeights.LeafFill == nil {
		v := DefaultLeafFillWeight
		a.ScoreWeights.LeafFill = &v
	}
}

// Validate checks defaulted args.
func Validate(path *field.Path, a *HyperTopologyArgs) error {
	var errs field.ErrorList
	if a.PermitTimeoutSeconds == nil || *a.PermitTimeoutSeconds < 1 || *a.PermitTimeoutSeconds > MaxPermitTimeoutSeconds {
		errs = append(errs, field.Invalid(path.Child("permitTimeoutSeconds"), deref(a.PermitTimeoutSeconds), fmt.Sprintf("must be between 1 and %d (kube-scheduler caps a Permit wait at 15 minutes)", MaxPermitTimeoutSeconds)))
	}
	if a.WaitForEnqueue == nil {
		errs = append(errs, field.Required(path.Child("waitForEnqueue"), "defaults not applied"))
	}
	if a.MaxCandidatesPerTier == nil || *a.MaxCandidatesPerTier < 1 {
		errs = append(errs, field.Invalid(path.Child("maxCandidatesPerTier"), deref(a.MaxCandidatesPerTier), "must be at least 1"))
	}
	if w := a.ScoreWeights; w == nil {
		errs = append(errs, field.Required(path.Child("scoreWeights"), "defaults not applied"))
	} else {
		for name, v := range map[string]*int32{"locality": w.Locality, "leafFill": w.LeafFill} {
			if v == nil || *v < 0 || *v > MaxWeight {
				errs = append(errs, field.Invalid(path.Child("scoreWeights", name), deref(v), fmt.Sprintf("must be between 0 and %d", MaxWeight)))
			}
		}
	}
	return errs.ToAggregate()
}

func deref(p *int32) interface{} {
	if p == nil {
		return "<unset>"
	}
	return *p
}

// FromObject turns what kube-scheduler hands a plugin factory into defaulted, validated args: typed
// args (decoded through the registered scheme), *runtime.Unknown (raw JSON/YAML) or nil.
func FromObject(obj runtime.Object) (*HyperTopologyArgs, error) {
	var a *HyperTopologyArgs
	switch o := obj.(type) {
	case nil:
		a = &HyperTopologyArgs{}
	case *HyperTopologyArgs:
		a = o.DeepCopy()
	case *runtime.Unknown:
		a = &HyperTopologyArgs{}
		if err := frameworkruntime.DecodeInto(o, a); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", Kind, err)
		}
	default:
		return nil, fmt.Errorf("want args of type %s, got %T", Kind, obj)
	}
	SetDefaults(a)
	if err := Validate(field.NewPath(Kind), a); err != nil {
		return nil, err
	}
	return a, nil
}

var (
	v1GV       = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}
	internalGV = schedconfig.SchemeGroupVersion
)

func addV1(s *runtime.Scheme) error {
	s.AddKnownTypes(v1GV, &HyperTopologyArgs{})
	s.AddTypeDefaultingFunc(&HyperTopologyArgs{}, func(o interface{}) { SetDefaults(o.(*HyperTopologyArgs)) })
	return nil
}

func addInternal(s *runtime.Scheme) error {
	s.AddKnownTypes(internalGV, &HyperTopologyArgs{})
	return nil
}

func init() {
	// kube-scheduler builds a second scheme lazily from these builders to default and convert plugin
	// args (GetPluginArgConversionScheme); register there.
	schedconfigv1.SchemeBuilder.Register(addV1)
	schedconfig.SchemeBuilder.Register(addInternal)
	// The main configuration scheme was built in its package's init, before this one: add directly.
	utilruntime.Must(addV1(schedscheme.Scheme))
	utilruntime.Must(addInternal(schedscheme.Scheme))
}
