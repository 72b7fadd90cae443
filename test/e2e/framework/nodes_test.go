package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

func TestParseNodes(t *testing.T) {
	for _, v := range []string{"", "kwok"} {
		n, err := ParseNodes(v)
		if err != nil || n.Kind != KwokNodes || n.Selector["type"] != "kwok" || n.Image != kwokImage || !n.Simulated() {
			t.Errorf("ParseNodes(%q) = %+v, %v; want kwok nodes selected by type=kwok", v, n, err)
		}
	}
	n, err := ParseNodes("real")
	if err != nil || n.Kind != RealNodes || n.Selector[RealNodeLabel] != RealNodeValue || n.Image != WorkerImage || n.Simulated() || len(n.Tolerations) != 0 {
		t.Errorf("ParseNodes(real) = %+v, %v; want real nodes selected by %s=%s running %s", n, err, RealNodeLabel, RealNodeValue, WorkerImage)
	}
	_, err = ParseNodes("Real")
	if err == nil || !strings.Contains(err.Error(), NodesEnv) || !strings.Contains(err.Error(), `"real"`) {
		t.Errorf("ParseNodes(Real) error = %v; want one naming %s and its values", err, NodesEnv)
	}
}

// The YAML fragment, pasted into an inline manifest at its indent, gives the pod spec Apply gives.
func TestPodSpecYAMLMatchesApply(t *testing.T) {
	for _, kind := range []string{"kwok", "real"} {
		n, err := ParseNodes(kind)
		if err != nil {
			t.Fatal(err)
		}
		manifest := "spec:\n  template:\n    spec:\n      restartPolicy: Never\n" + n.PodSpecYAML(6) +
			"      containers:\n      - name: c\n        image: " + n.Image + "\n"
		var got struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.UnmarshalStrict([]byte(manifest), &got); err != nil {
			t.Fatalf("%s: manifest does not parse: %v\n%s", kind, err, manifest)
		}
		want := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: n.Image}}}
		n.Apply(&want)
		if !equality.Semantic.DeepEqual(got.Spec.Template.Spec, want) {
			t.Errorf("%s: YAML gives %+v, Apply gives %+v", kind, got.Spec.Template.Spec, want)
		}
	}
}

// Apply keeps the pod's own selector entries and tolerations.
func TestApplyKeepsExisting(t *testing.T) {
	n, _ := ParseNodes("kwok")
	own := corev1.Toleration{Key: "x", Operator: corev1.TolerationOpExists}
	spec := corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}, Tolerations: []corev1.Toleration{own}}
	n.Apply(&spec)
	if spec.NodeSelector["zone"] != "a" || spec.NodeSelector["type"] != "kwok" || len(spec.Tolerations) != 2 || spec.Tolerations[0] != own {
		t.Errorf("Apply gave selector %v, tolerations %v", spec.NodeSelector, spec.Tolerations)
	}
}

func TestRunningContainer(t *testing.T) {
	rn, _ := ParseNodes("real")
	c := rn.RunningContainer("c", 10*time.Minute)
	if c.Image != WorkerImage || strings.Join(c.Args, " ") != "--duration 10m0s" {
		t.Errorf("real nodes: %+v; want the worker with --duration 10m0s", c)
	}
	kwok, _ := ParseNodes("")
	c = kwok.RunningContainer("c", 10*time.Minute)
	if c.Image != kwokImage || len(c.Args) != 0 {
		t.Errorf("kwok nodes: %+v; want the pause image without arguments", c)
	}
}
