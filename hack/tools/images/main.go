// Command images builds hyperbatch's container images as OCI archives without Docker or a registry
// (`make images`): each archive is an OCI image layout packed in a tar, which `ctr images import`
// loads into containerd under the name in its index.
//
//	go run . --bin DIR --out DIR [--tag dev] [--arch amd64]
//
// --bin holds static binaries (CGO_ENABLED=0): manager, scheduler, worker and pause. It writes
// hyperbatch.tar (manager and scheduler, as the Dockerfile's image: /manager and /scheduler, user
// 65532), worker.tar (/worker, the e2e workload, user 65532) and pause.tar (/pause, the pod sandbox,
// user 65535) into --out, then reads each archive back, validates it as an OCI image layout and runs
// every binary in it once.
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Registry is the registry part of every image name: no such registry exists, so nothing ever pulls
// these names; they are only imported.
const Registry = "hyperbatch.local"

// nonroot is distroless's nonroot user (the Dockerfile's base image), which the chart runs as.
const nonroot = 65532

var passwd = []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")
var group = []byte("root:x:0:\nnonroot:x:65532:\nnobody:x:65534:\n")

// base is what every image has beside its binaries: the users, /tmp and the nonroot home.
func base() []file {
	return []file{
		{Path: "/etc/passwd", Mode: 0o644, Data: passwd},
		{Path: "/etc/group", Mode: 0o644, Data: group},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: nonroot, GID: nonroot},
	}
}

// archive is one image and the file it is written to.
type archive struct {
	File string
	Spec spec
}

// archives are the three images, from the binaries in bin.
func archives(bin, tag string) []archive {
	exe := func(name string) file { return file{Path: "/" + name, Mode: 0o755, Src: filepath.Join(bin, name)} }
	user := fmt.Sprintf("%d:%d", nonroot, nonroot)
	return []archive{
		{"hyperbatch.tar", spec{Ref: Registry + "/hyperbatch:" + tag, User: user,
			Files: append(base(), exe("manager"), exe("scheduler"))}},
		{"worker.tar", spec{Ref: Registry + "/worker:" + tag, User: user, Entrypoint: []string{"/worker"},
			Files: append(base(), exe("worker"))}},
		// The pause image runs as 65535, as Kubernetes' own.
		{"pause.tar", spec{Ref: Registry + "/pause:" + tag, User: "65535:65535", Entrypoint: []string{"/pause"},
			Files: []file{exe("pause")}}},
	}
}

// checkStatic refuses a binary that needs a dynamic loader: an image without libc could not run it.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w (build it first; make images does)", path, err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0 so it runs in an image without libc", path)
		}
	}
	return nil
}

func build(bin, out, tag, arch string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, a := range archives(bin, tag) {
		start := time.Now()
		for _, f := range a.Spec.Files {
			if f.Src != "" {
				if err := checkStatic(f.Src); err != nil {
					return fmt.Errorf("image %s: %w", a.Spec.Ref, err)
				}
			}
		}
		img, err := image(a.Spec, arch)
		if err != nil {
			return err
		}
		path := filepath.Join(out, a.File)
		if err := writeArchive(path, a.Spec.Ref, img); err != nil {
			return err
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		v, err := verify(path, a.Spec.Ref)
		if err != nil {
			return fmt.Errorf("image %s as written: %w", a.Spec.Ref, err)
		}
		fmt.Printf("images: %s -> %s (%s, %d files, user %s, verified in %s)\n", a.Spec.Ref, path, d, len(v.Files), v.User, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func main() {
	bin := flag.String("bin", "", "directory of the static binaries manager, scheduler, worker and pause")
	out := flag.String("out", "", "directory to write hyperbatch.tar, worker.tar and pause.tar into")
	tag := flag.String("tag", "dev", "tag of the three images")
	arch := flag.String("arch", runtime.GOARCH, "image architecture (the binaries' GOARCH)")
	flag.Parse()
	if *bin == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "images: --bin and --out are required (make images passes them)")
		os.Exit(2)
	}
	if err := build(*bin, *out, *tag, *arch); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}
