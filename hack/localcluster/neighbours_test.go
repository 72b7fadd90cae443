package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Every webhook the JobSet controller serves (its kubebuilder markers in the sigs.k8s.io/jobset
// module go.mod pins, pkg/webhooks/*.go) is registered by the local cluster with the marker's path,
// name, mutating flag, resource and operations, as a user's cluster has them (JobSet's own manifests
// are generated from the same markers); pods only with the jobset-name label (its Helm chart's
// objectSelector).
func TestJobSetWebhooksMatchJobSetMarkers(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset").Output()
	if err != nil {
		t.Fatalf("locating the jobset module: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "pkg", "webhooks", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`\+kubebuilder:webhook:(\S+)`)
	type reg struct {
		path, resource, ops string
		mutating            bool
		selector            bool
	}
	got := map[string]reg{}
	for _, o := range jobSetWebhookConfigs("127.0.0.1:1", []byte("ca")) {
		switch c := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, w := range c.Webhooks {
				got[w.Name] = reg{strings.TrimPrefix(*w.ClientConfig.URL, "https://127.0.0.1:1"), w.Rules[0].Resources[0], ops(w.Rules[0].Operations), true, w.ObjectSelector != nil}
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, w := range c.Webhooks {
				got[w.Name] = reg{strings.TrimPrefix(*w.ClientConfig.URL, "https://127.0.0.1:1"), w.Rules[0].Resources[0], ops(w.Rules[0].Operations), false, w.ObjectSelector != nil}
			}
		}
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marker.FindAllStringSubmatch(string(src), -1) {
			kv := map[string]string{}
			for _, part := range strings.Split(m[1], ",") {
				if k, v, ok := strings.Cut(part, "="); ok {
					kv[k] = v
				}
			}
			seen++
			r, ok := got[kv["name"]]
			if !ok {
				t.Errorf("%s: JobSet's webhook %s (%s) is not registered", filepath.Base(f), kv["name"], kv["path"])
				continue
			}
			want := reg{kv["path"], kv["resources"], strings.ToLower(strings.ReplaceAll(kv["verbs"], ";", ",")), kv["mutating"] == "true", kv["resources"] == "pods"}
			if r != want {
				t.Errorf("webhook %s: registered %+v, JobSet's marker says %+v", kv["name"], r, want)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("found %d webhook markers in JobSet's pkg/webhooks, want its 4 (2 JobSet, 2 pod)", seen)
	}
	if len(got) != seen {
		t.Errorf("registered %d JobSet webhooks, JobSet serves %d", len(got), seen)
	}
}

func ops(o []admissionregistrationv1.OperationType) string {
	var s []string
	for _, op := range o {
		s = append(s, strings.ToLower(string(op)))
	}
	return strings.Join(s, ",")
}
