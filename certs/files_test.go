package certs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs") // created on demand
	files := []File{{Name: "tls.crt", Data: []byte("crt-1"), Mode: 0o644}, {Name: "tls.key", Data: []byte("key-1"), Mode: 0o600}}
	changed, err := WriteFiles(dir, files)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Fatalf("%s = %q, %v", f.Name, got, err)
		}
		st, _ := os.Stat(filepath.Join(dir, f.Name))
		if st.Mode().Perm() != f.Mode {
			t.Fatalf("%s mode %v, want %v", f.Name, st.Mode().Perm(), f.Mode)
		}
		if link, err := os.Readlink(filepath.Join(dir, f.Name)); err != nil || link != filepath.Join(dataLink, f.Name) {
			t.Fatalf("%s should link to %s/%s: %q %v", f.Name, dataLink, f.Name, link, err)
		}
	}
	first := dirEntries(t, dir)
	if len(first) != 4 { // ..certs-*, ..data, tls.crt, tls.key
		t.Fatalf("dir holds %v", first)
	}
	before, _ := os.Stat(filepath.Join(dir, "tls.crt"))

	changed, err = WriteFiles(dir, files)
	if err != nil || changed {
		t.Fatalf("unchanged write: changed=%v err=%v", changed, err)
	}
	after, _ := os.Stat(filepath.Join(dir, "tls.crt"))
	if !os.SameFile(before, after) {
		t.Fatal("an unchanged file was replaced")
	}

	files[0].Data, files[1].Data = []byte("crt-2"), []byte("key-2")
	if changed, err = WriteFiles(dir, files); err != nil || !changed {
		t.Fatalf("second write: changed=%v err=%v", changed, err)
	}
	second := dirEntries(t, dir)
	if len(second) != 4 || second[0] == first[0] {
		t.Fatalf("old version not replaced: %v -> %v", first, second)
	}
	for _, n := range second {
		if strings.Contains(n, ".tmp-") {
			t.Fatalf("temporary file %s left behind", n)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "tls.key")); string(got) != "key-2" {
		t.Fatalf("tls.key = %q", got)
	}
}

func TestWriteFilesReplacesPlainFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFiles(dir, []File{{Name: "tls.crt", Data: []byte("new"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); string(got) != "new" {
		t.Fatalf("tls.crt = %q", got)
	}
	if _, err := os.Readlink(filepath.Join(dir, "tls.crt")); err != nil {
		t.Fatal("plain file not replaced by the link")
	}
}

// TestWriteFilesIsAtomic switches a certificate/key pair many times while readers read both files:
// every read returns a complete version (never a missing, empty or partial file), and the pair read
// inside one version directory is always consistent.
func TestWriteFilesIsAtomic(t *testing.T) {
	dir := t.TempDir()
	version := func(i int) []File {
		c := byte('a' + i%2)
		return []File{
			{Name: "tls.crt", Data: bytes.Repeat([]byte{c}, 64<<10), Mode: 0o644},
			{Name: "tls.key", Data: bytes.Repeat([]byte{c}, 16<<10), Mode: 0o600},
		}
	}
	if _, err := WriteFiles(dir, version(0)); err != nil {
		t.Fatal(err)
	}
	complete := func(b []byte, size int) bool {
		return len(b) == size && bytes.Count(b, b[:1]) == size
	}
	var stop atomic.Bool
	var bad, mixed atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				crt, err1 := os.ReadFile(filepath.Join(dir, "tls.crt"))
				key, err2 := os.ReadFile(filepath.Join(dir, "tls.key"))
				if errors.Is(err1, fs.ErrNotExist) || errors.Is(err2, fs.ErrNotExist) {
					// The one window the kubelet's scheme has too: the path was resolved through
					// ..data just before the old version directory was deleted. Readers retry.
					continue
				}
				if err1 != nil || err2 != nil || !complete(crt, 64<<10) || !complete(key, 16<<10) {
					bad.Add(1)
					continue
				}
				// Reading through ..data once pins a version: that pair must match.
				target, err := os.Readlink(filepath.Join(dir, dataLink))
				if err != nil {
					continue
				}
				c, errC := os.ReadFile(filepath.Join(dir, target, "tls.crt"))
				k, errK := os.ReadFile(filepath.Join(dir, target, "tls.key"))
				if errC == nil && errK == nil && c[0] != k[0] {
					mixed.Add(1)
				}
			}
		}()
	}
	for i := 1; i <= 100; i++ {
		if _, err := WriteFiles(dir, version(i)); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d reads saw a missing or partial file", n)
	}
	if n := mixed.Load(); n > 0 {
		t.Fatalf("%d version directories held a mismatched pair", n)
	}
}

func TestWriteFilesError(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFiles(filepath.Join(blocker, "sub"), []File{{Name: "x", Data: []byte("x"), Mode: 0o600}}); err == nil || !strings.Contains(err.Error(), "creating cert dir") {
		t.Fatalf("err = %v, want a cert dir error", err)
	}
}
