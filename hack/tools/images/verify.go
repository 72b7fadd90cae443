package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// runChecks: how each binary is run to show it runs (arguments that make it print and exit 0).
var runChecks = map[string][]string{
	"/manager":   {"-h"},
	"/scheduler": {"--version"},
	"/worker":    nil,
	"/pause":     {"-v"},
}

// verified is what verify found in one archive.
type verified struct {
	Ref   string
	User  string
	Files map[string]int64 // path -> mode, of the regular files
	Ran   map[string]string
}

// verify reads the archive back as an OCI image layout, validates every blob against its digest,
// checks its one image is named ref for containerd, and runs each binary it holds (on this host:
// the binaries are static) with runChecks' arguments.
func verify(archivePath, ref string) (verified, error) {
	v := verified{Files: map[string]int64{}, Ran: map[string]string{}}
	dir, err := os.MkdirTemp("", "images-verify-")
	if err != nil {
		return v, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := untar(archivePath, dir); err != nil {
		return v, fmt.Errorf("%s: %w", archivePath, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return v, fmt.Errorf("%s: not an OCI image layout (no oci-layout file)", archivePath)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return v, fmt.Errorf("%s: %w", archivePath, err)
	}
	if err := validate.Index(idx); err != nil {
		return v, fmt.Errorf("%s: invalid OCI index: %w", archivePath, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return v, err
	}
	if len(im.Manifests) != 1 {
		return v, fmt.Errorf("%s: %d manifests in index.json, want 1", archivePath, len(im.Manifests))
	}
	desc := im.Manifests[0]
	v.Ref = desc.Annotations[annotationContainerdRef]
	if v.Ref != ref || desc.Annotations[annotationRefName] != ref {
		return v, fmt.Errorf("%s: index names the image %q/%q, want %q", archivePath, v.Ref, desc.Annotations[annotationRefName], ref)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		return v, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v, err
	}
	v.User = cf.Config.User
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return v, fmt.Errorf("%s: reading the layer: %w", archivePath, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p := "/" + h.Name
		v.Files[p] = h.Mode
		args, ok := runChecks[p]
		if !ok {
			continue
		}
		exe := filepath.Join(dir, "run-"+filepath.Base(p))
		out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			return v, err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return v, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, exe, args...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err = cmd.Run()
		cancel()
		if err != nil {
			return v, fmt.Errorf("%s: %s %s from the image does not run: %w\n%s", archivePath, p, strings.Join(args, " "), err, buf.String())
		}
		v.Ran[p] = strings.TrimSpace(buf.String())
	}
	return v, nil
}

// untar unpacks the tar file into dir, refusing names that leave it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("entry %q leaves the archive", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.Create(target)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
