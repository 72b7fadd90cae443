package localproc

import (
	"os"
	"strconv"
	"sync"
	"syscall"
)

var keepInheritedOnce sync.Once

// KeepInheritedFiles marks every file descriptor above stderr that this process inherited (or opened
// without close-on-exec) close-on-exec, once per process, so the processes it starts get only
// their stdin, stdout, stderr and what they are given explicitly. Without it a child inherits, for
// instance, the descriptor of the bench lock `flock` holds for the benchmark, and a child that
// outlives an interrupted benchmark keeps every other benchmark waiting. Start calls it; call it
// before starting children by other means (envtest). Best effort: a descriptor that cannot be
// read is left alone.
func KeepInheritedFiles() {
	keepInheritedOnce.Do(closeOnExecAboveStderr)
}

func closeOnExecAboveStderr() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		syscall.CloseOnExec(fd)
	}
}
