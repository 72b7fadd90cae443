package localproc

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// A descriptor opened without close-on-exec (as flock(1) hands the bench lock to its command) reaches
// a child until closeOnExecAboveStderr, and not after.
func TestInheritedDescriptorNotPassedOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_RDWR, 0o600) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Close(fd) }()
	childSees := func() bool {
		return exec.Command("sh", "-c", "test -e /proc/self/fd/"+strconv.Itoa(fd)).Run() == nil
	}
	if !childSees() {
		t.Fatalf("a child does not see descriptor %d before the call: the test cannot tell anything", fd)
	}
	closeOnExecAboveStderr()
	if childSees() {
		t.Fatalf("a child still inherits descriptor %d", fd)
	}
}
