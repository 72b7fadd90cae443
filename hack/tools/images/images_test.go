package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// staticBinaries builds the worker and the pause binaries (hack/images) static, once per run.
func staticBinaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "images-test-bin-")
		if binErr != nil {
			return
		}
		root, err := filepath.Abs("../../..")
		if err != nil {
			binErr = err
			return
		}
		for _, name := range []string{"worker", "pause"} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(binDir, name), "./hack/images/"+name)
			cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("building %s: %w\n%s", name, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The worker and pause archives are valid OCI image layouts named for containerd, their binaries
// keep their mode and run, and the images run as the users the chart and the kubelet expect.
func TestArchivesAreValidAndRun(t *testing.T) {
	bin, out := staticBinaries(t), t.TempDir()
	for _, a := range archives(bin, "test")[1:] { // worker and pause: the hyperbatch image needs make images' manager and scheduler
		img, err := image(a.Spec, runtime.GOARCH)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(out, a.File)
		if err := writeArchive(path, a.Spec.Ref, img); err != nil {
			t.Fatal(err)
		}
		v, err := verify(path, a.Spec.Ref)
		if err != nil {
			t.Fatalf("%s: %v", a.File, err)
		}
		exe := a.Spec.Entrypoint[0]
		if v.Files[exe] != 0o755 {
			t.Errorf("%s: %s has mode %o, want 755", a.File, exe, v.Files[exe])
		}
		if _, ran := v.Ran[exe]; !ran {
			t.Errorf("%s: %s was not run", a.File, exe)
		}
		if v.User != a.Spec.User || v.User == "" || strings.HasPrefix(v.User, "0") {
			t.Errorf("%s: user %q, want %q (non-root)", a.File, v.User, a.Spec.User)
		}
	}
	// The worker printed its rank line from inside the image.
	v, err := verify(filepath.Join(out, "worker.tar"), Registry+"/worker:test")
	if err != nil || !strings.Contains(v.Ran["/worker"], "worker: rank unknown") {
		t.Errorf("the worker from the image printed %q (%v)", v.Ran["/worker"], err)
	}
	// Same binaries, same image: the digest does not depend on the time of the build.
	a := archives(bin, "test")[1]
	i1, _ := image(a.Spec, runtime.GOARCH)
	i2, _ := image(a.Spec, runtime.GOARCH)
	d1, _ := i1.Digest()
	d2, _ := i2.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the worker image differ: %s, %s", d1, d2)
	}
}

// A wrong name, a blob changed after writing and a dynamically linked binary are each refused.
func TestVerifyRefusesBrokenArchives(t *testing.T) {
	bin, out := staticBinaries(t), t.TempDir()
	a := archives(bin, "test")[2] // pause
	img, err := image(a.Spec, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, a.File)
	if err := writeArchive(path, a.Spec.Ref, img); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(path, Registry+"/pause:other"); err == nil || !strings.Contains(err.Error(), "pause:other") {
		t.Errorf("verify under another name: %v; want an error naming it", err)
	}

	// Flip one byte of the layer blob (the largest blob) inside the archive.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rewritten bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(raw)), tar.NewWriter(&rewritten)
	var largest string
	var largestSize int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "blobs/") && h.Size > largestSize {
			largest, largestSize = h.Name, h.Size
		}
	}
	tr = tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		body, _ := io.ReadAll(tr)
		if h.Name == largest {
			body[len(body)/2] ^= 0xff
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(out, "broken.tar")
	if err := os.WriteFile(broken, rewritten.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(broken, a.Spec.Ref); err == nil {
		t.Errorf("verify accepted an archive whose blob %s was changed", largest)
	}

	// The host's /bin/true needs the dynamic loader.
	if _, err := os.Stat("/bin/true"); err == nil {
		if err := checkStatic("/bin/true"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("checkStatic(/bin/true) = %v; want the dynamic-link refusal", err)
		}
	}
	if err := checkStatic(filepath.Join(bin, "pause")); err != nil {
		t.Errorf("checkStatic(pause) = %v", err)
	}
}
