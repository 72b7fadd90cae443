package framework

import (
	"strings"
	"testing"
)

func TestParseInstall(t *testing.T) {
	for v, want := range map[string]Install{"": ProcessInstall, "process": ProcessInstall, "chart": ChartInstall} {
		if got, err := ParseInstall(v); err != nil || got != want {
			t.Errorf("ParseInstall(%q) = %q, %v; want %q", v, got, err, want)
		}
	}
	_, err := ParseInstall("helm")
	if err == nil || !strings.Contains(err.Error(), InstallEnv) || !strings.Contains(err.Error(), `"chart"`) {
		t.Errorf("ParseInstall(helm) error = %v; want one naming %s and its values", err, InstallEnv)
	}
}

type skipRecorder struct{ msg string }

func (s *skipRecorder) Helper()                       {}
func (s *skipRecorder) Skipf(format string, _ ...any) { s.msg = format }

func TestSkipUnlessChart(t *testing.T) {
	t.Setenv(InstallEnv, "")
	var r skipRecorder
	SkipUnlessChart(&r, "it deletes pods")
	if r.msg == "" {
		t.Fatal("process install: the chart check was not skipped")
	}
	t.Setenv(InstallEnv, "chart")
	r = skipRecorder{}
	SkipUnlessChart(&r, "it deletes pods")
	if r.msg != "" {
		t.Fatalf("chart install: skipped with %q", r.msg)
	}
}
