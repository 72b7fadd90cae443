package args

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// decode runs a KubeSchedulerConfiguration through the decoder kube-scheduler's --config loader uses
// (decode + default + convert to the internal version), then its validation.
func decode(t *testing.T, data string) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("decoded %T", obj)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatalf("validation: %v", err)
	}
	return cfg
}

func argsOf(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, profile string) *HyperTopologyArgs {
	t.Helper()
	for _, p := range cfg.Profiles {
		if p.SchedulerName != profile {
			continue
		}
		for _, pc := range p.PluginConfig {
			if pc.Name == PluginName {
				a, ok := pc.Args.(*HyperTopologyArgs)
				if !ok {
					t.Fatalf("args decoded as %T, want *HyperTopologyArgs", pc.Args)
				}
				return a
			}
		}
	}
	t.Fatalf("profile %s has no %s pluginConfig", profile, PluginName)
	return nil
}

func TestConfigFileDecodesTypedArgs(t *testing.T) {
	const profile = `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: s
    plugins:
      queueSort: {enabled: [{name: HyperTopology}], disabled: [{name: "*"}]}
      preFilter: {enabled: [{name: HyperTopology}]}
      permit: {enabled: [{name: HyperTopology}]}
`
	a := argsOf(t, decode(t, profile+`
    pluginConfig:
      - name: HyperTopology
        args:
          permitTimeoutSeconds: 30
          scoreWeights: {leafFill: 0}
`), "s")
	if *a.PermitTimeoutSeconds != 30 || *a.MaxCandidatesPerTier != DefaultMaxCandidatesPerTier ||
		*a.ScoreWeights.Locality != DefaultLocalityWeight || *a.ScoreWeights.LeafFill != 0 {
		t.Errorf("explicit args = %+v %+v", a, a.ScoreWeights)
	}
	if _, err := FromObject(a); err != nil {
		t.Errorf("FromObject(typed): %v", err)
	}
	// A profile that enables the plugin without pluginConfig gets defaulted args, as in-tree plugins do.
	b := argsOf(t, decode(t, profile), "s")
	if *b.PermitTimeoutSeconds != DefaultPermitTimeoutSeconds || *b.ScoreWeights.LeafFill != DefaultLeafFillWeight {
		t.Errorf("implicit args = %+v", b)
	}
}

// kube-scheduler requires every profile to use the same QueueSort plugin with the same args; as
// HyperTopology is the QueueSort plugin, its args must match across profiles that enable it.
func TestQueueSortArgsMustMatchAcrossProfiles(t *testing.T) {
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(`
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: a
    plugins: {queueSort: {enabled: [{name: HyperTopology}], disabled: [{name: "*"}]}}
    pluginConfig: [{name: HyperTopology, args: {permitTimeoutSeconds: 30}}]
  - schedulerName: b
    plugins: {queueSort: {enabled: [{name: HyperTopology}], disabled: [{name: "*"}]}}
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(obj.(*schedconfig.KubeSchedulerConfiguration)); err == nil ||
		!strings.Contains(err.Error(), "queueSort must be the same for all profiles") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigFileRejectsUnknownField(t *testing.T) {
	_, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(`
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: x
    pluginConfig:
      - name: HyperTopology
        args: {permitTimeout: 30}
`), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "permitTimeout") {
		t.Fatalf("err = %v, want a strict decoding error naming the unknown field", err)
	}
}

// The example profile shipped in docs/ must decode, validate and carry typed args.
func TestDocsSchedulerConfig(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := decode(t, string(data))
	a := argsOf(t, cfg, "hyperbatch-scheduler")
	if _, err := FromObject(a); err != nil {
		t.Fatalf("docs args invalid: %v", err)
	}
	for _, p := range cfg.Profiles {
		if p.SchedulerName != "hyperbatch-scheduler" {
			continue
		}
		if qs := p.Plugins.QueueSort.Enabled; len(qs) != 1 || qs[0].Name != PluginName {
			t.Errorf("queueSort = %v, want only %s", qs, PluginName)
		}
		pf := p.Plugins.PostFilter.Enabled
		if len(pf) == 0 || pf[0].Name != PluginName {
			t.Errorf("postFilter = %v, want %s first (before DefaultPreemption)", pf, PluginName)
		}
		for _, set := range []schedconfig.PluginSet{p.Plugins.PreFilter, p.Plugins.Filter, p.Plugins.Score, p.Plugins.Reserve, p.Plugins.Permit} {
			found := false
			for _, e := range set.Enabled {
				found = found || e.Name == PluginName
			}
			if !found {
				t.Errorf("%s not enabled in %v", PluginName, set.Enabled)
			}
		}
	}
}

func TestFromObject(t *testing.T) {
	a, err := FromObject(&k8sruntime.Unknown{Raw: []byte(`{"permitTimeoutSeconds": 5, "maxCandidatesPerTier": 3}`), ContentType: k8sruntime.ContentTypeJSON})
	if err != nil || *a.PermitTimeoutSeconds != 5 || *a.MaxCandidatesPerTier != 3 || *a.ScoreWeights.Locality != DefaultLocalityWeight {
		t.Fatalf("FromObject(unknown) = %+v, %v", a, err)
	}
	if a, err := FromObject(nil); err != nil || *a.PermitTimeoutSeconds != DefaultPermitTimeoutSeconds {
		t.Fatalf("FromObject(nil) = %+v, %v", a, err)
	}
	if _, err := FromObject(&schedconfig.DefaultPreemptionArgs{}); err == nil {
		t.Fatalf("FromObject accepted another plugin's args")
	}
	for raw, want := range map[string]string{
		`{"permitTimeoutSeconds": 0}`:         "permitTimeoutSeconds",
		`{"permitTimeoutSeconds": 4000}`:      "permitTimeoutSeconds",
		`{"permitTimeoutSeconds": 901}`:       "caps a Permit wait at 15 minutes",
		`{"maxCandidatesPerTier": 0}`:         "maxCandidatesPerTier",
		`{"scoreWeights": {"locality": -1}}`:  "scoreWeights.locality",
		`{"scoreWeights": {"leafFill": 101}}`: "scoreWeights.leafFill",
		`{"permitTimeoutSeconds": "soon"}`:    "decoding",
	} {
		_, err := FromObject(&k8sruntime.Unknown{Raw: []byte(raw)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FromObject(%s) err = %v, want mention of %q", raw, err, want)
		}
	}
	// kube-scheduler's maximum Permit wait is accepted.
	if a, err := FromObject(&k8sruntime.Unknown{Raw: []byte(`{"permitTimeoutSeconds": 900}`)}); err != nil || *a.PermitTimeoutSeconds != 900 {
		t.Errorf("permitTimeoutSeconds 900: %v", err)
	}
	if err := Validate(field.NewPath("x"), &HyperTopologyArgs{}); err == nil {
		t.Errorf("undefaulted args validated")
	}
}
