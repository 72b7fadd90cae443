package certs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File is one file to place in the cert dir.
type File struct {
	Name string
	Data []byte
	Mode fs.FileMode
}

const (
	dataLink      = "..data"   // symlink to the current version directory
	versionPrefix = "..certs-" // version directories: ..certs-<random>
)

func certFiles(p *plan) []File {
	return []File{
		{Name: CACertKey, Data: p.Data[CACertKey], Mode: 0o644},
		{Name: TLSCertKey, Data: p.Data[TLSCertKey], Mode: 0o644},
		{Name: TLSKeyKey, Data: p.Data[TLSKeyKey], Mode: 0o600},
	}
}

// WriteFiles publishes files in dir (created if missing) as one atomic update, the way the kubelet
// projects a Secret volume: the files are written and synced into a fresh hidden version directory,
// a temporary symlink to it is renamed over dir/..data, and each dir/<name> is a symlink to
// ..data/<name>. The rename switches every file at once, so a reader never sees a partial file nor a
// new tls.crt with an old tls.key (controller-runtime's certwatcher reloads once, cleanly, when the
// old version directory is removed). Nothing is written when every file already has the wanted
// content. It reports whether anything changed. (As with the kubelet's scheme, a reader that resolves
// a path through ..data at the very moment the old version directory is deleted can get "not exist";
// certwatcher then keeps its current certificate and reloads on the next event or poll.)
func WriteFiles(dir string, files []File) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("creating cert dir %s: %w", dir, err)
	}
	if upToDate(dir, files) {
		return false, nil
	}
	version, err := os.MkdirTemp(dir, versionPrefix)
	if err != nil {
		return false, fmt.Errorf("creating a version directory in %s: %w", dir, err)
	}
	if err := os.Chmod(version, 0o755); err != nil {
		return false, fmt.Errorf("setting mode of %s: %w", version, err)
	}
	for _, f := range files {
		if err := writeSynced(filepath.Join(version, f.Name), f.Data, f.Mode); err != nil {
			_ = os.RemoveAll(version)
			return false, err
		}
	}
	syncDir(version)
	if err := swapSymlink(filepath.Join(dir, dataLink), filepath.Base(version)); err != nil {
		_ = os.RemoveAll(version)
		return false, err
	}
	for _, f := range files {
		target := filepath.Join(dataLink, f.Name)
		if cur, err := os.Readlink(filepath.Join(dir, f.Name)); err == nil && cur == target {
			continue
		}
		// First write (or a plain file left by something else): replace it with the link, atomically.
		if err := swapSymlink(filepath.Join(dir, f.Name), target); err != nil {
			return true, err
		}
	}
	syncDir(dir)
	removeOldVersions(dir, filepath.Base(version))
	return true, nil
}

func upToDate(dir string, files []File) bool {
	for _, f := range files {
		cur, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil || !bytes.Equal(cur, f.Data) {
			return false
		}
		if target, err := os.Readlink(filepath.Join(dir, f.Name)); err != nil || target != filepath.Join(dataLink, f.Name) {
			return false
		}
	}
	return true
}

// swapSymlink points path at target by renaming a temporary symlink over it (atomic on POSIX).
func swapSymlink(path, target string) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("creating symlink %s -> %s: %w", tmp, target, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("renaming %s to %s: %w", tmp, path, err)
	}
	return nil
}

func writeSynced(path string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // not narrowed by the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make renames durable; best effort
		_ = d.Close()
	}
}

// removeOldVersions deletes every version directory but keep (best effort: leftovers are harmless
// and go with the next write).
func removeOldVersions(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), versionPrefix) && e.Name() != keep {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
