package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the index entry: OCI's ref name, and containerd's full image name, which `ctr images
// import` names the image by.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerdRef = "io.containerd.image.name"
)

// epoch dates every file and the image, so the same binaries give the same image digest.
var epoch = time.Unix(0, 0).UTC()

// file is one entry of an image's single layer.
type file struct {
	Path string // absolute path in the image
	Mode int64  // permission bits (and 0o1000 sticky)
	Dir  bool
	UID  int
	GID  int
	Src  string // host file to copy (regular files without Data)
	Data []byte
}

// spec is one image: its reference, its files and how it runs.
type spec struct {
	Ref        string // name:tag as containerd will know it
	Files      []file
	User       string
	Entrypoint []string
	Env        []string
}

// layerTar packs the files, with their parent directories, into one uncompressed tar.
func layerTar(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	entries := append([]file(nil), files...)
	for _, f := range files {
		if f.Dir {
			dirs[f.Path] = true
		}
	}
	for _, f := range files {
		for d := filepath.Dir(f.Path); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			entries = append(entries, file{Path: d, Dir: true, Mode: 0o755})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	for _, f := range entries {
		if !strings.HasPrefix(f.Path, "/") {
			return nil, fmt.Errorf("image path %q: want an absolute path", f.Path)
		}
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: epoch, Format: tar.FormatPAX}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		data := f.Data
		if f.Src != "" {
			b, err := os.ReadFile(f.Src)
			if err != nil {
				return nil, fmt.Errorf("reading %s for %s: %w", f.Src, f.Path, err)
			}
			data = b
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// image builds the linux/amd64 OCI image of s: one gzip layer on an empty base.
func image(s spec, arch string) (v1.Image, error) {
	raw, err := layerTar(s.Files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", s.Ref, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/tools/images", Comment: s.Ref}})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: epoch}
	cf.Config.User, cf.Config.Entrypoint = s.User, s.Entrypoint
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, s.Env...)
	return mutate.ConfigFile(img, cf)
}

// writeArchive writes img as an OCI image layout packed in a tar (what `ctr images import` reads), at
// out, naming it s.Ref in the index.
func writeArchive(out, ref string, img v1.Image) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout for %s: %w", ref, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{annotationRefName: ref, annotationContainerdRef: ref})); err != nil {
		return fmt.Errorf("OCI layout for %s: %w", ref, err)
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("packing %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// tarDir packs the files under dir (relative names, sorted) into the tar file out.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), epoch, 0, 0, "", ""
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
