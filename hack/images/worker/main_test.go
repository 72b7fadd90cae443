package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParse(t *testing.T) {
	o, err := parse(nil, env(nil))
	if err != nil || o.duration != 0 || o.exitCode != 0 || o.peers != nil {
		t.Errorf("no arguments: %+v, %v; want exit 0 at once", o, err)
	}
	o, err = parse([]string{"--duration", "2s", "--exit-code", "7"}, env(map[string]string{"WORKER_DURATION": "9s", "WORKER_PEERS": "a, b,"}))
	if err != nil || o.duration != 2*time.Second || o.exitCode != 7 || strings.Join(o.peers, "|") != "a|b" {
		t.Errorf("flags over env: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--duration", "soon"}, {"--duration", "-1s"}, {"--exit-code", "256"}, {"--exit-code", "x"}, {"--nope"}} {
		if _, err := parse(bad, env(nil)); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("parse(%v) error = %v; want one naming %s", bad, err, bad[0])
		}
	}
}

func TestReportRankAndPeers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "worker.host"), []byte("job-worker-0.job\njob-worker-1.job\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	vars := map[string]string{"JOB_COMPLETION_INDEX": "3", "VC_TASK_INDEX": "1"}
	report(&out, env(vars), []string{"VC_MASTER_HOSTS=job-master-0.job", "PATH=/bin"}, dir, []string{"localhost"})
	got := out.String()
	for _, want := range []string{"rank 3 (JOB_COMPLETION_INDEX)", "4 peers", "peer job-master-0.job:", "peer job-worker-1.job:", "peer localhost: "} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	report(&out, env(nil), nil, dir+"/none", nil)
	if !strings.Contains(out.String(), "rank unknown") || !strings.Contains(out.String(), "0 peers") {
		t.Errorf("without rank or peers:\n%s", out.String())
	}
}

func TestRunExitCodeAndSignal(t *testing.T) {
	start := time.Now()
	if code := run(options{duration: 200 * time.Millisecond, exitCode: 4}, make(chan os.Signal, 1)); code != 4 {
		t.Errorf("run exit code = %d, want 4", code)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("run returned after %s, before its 200ms", d)
	}
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	if code := run(options{duration: time.Hour}, sigs); code != 143 {
		t.Errorf("run after SIGTERM = %d, want 143", code)
	}
}
