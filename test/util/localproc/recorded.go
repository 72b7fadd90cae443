package localproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Recorded is a PID file and what it points to: a process an earlier `up` started, found by `down`
// and `status`, which did not start it.
type Recorded struct {
	Cluster   string // the cluster's name (empty for a PID file of an older layout, <component>.pid)
	Component string
	PIDFile   string
	PID       int
	// Alive is true when the PID runs the binary the component names (guards against PID reuse).
	Alive bool
	// Note explains a stale or reused PID.
	Note string
}

// Process is the name messages use: "<cluster>/<component>".
func (r Recorded) Process() string { return processName(r.Cluster, r.Component) }

func processName(cluster, component string) string {
	if cluster == "" {
		return component
	}
	return cluster + "/" + component
}

// ReadPIDFiles lists the PID files of dir (<cluster>.<component>.pid) and checks each process. A
// missing dir yields nothing.
func ReadPIDFiles(dir string) ([]Recorded, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []Recorded
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		r := Recorded{Component: strings.TrimSuffix(e.Name(), ".pid"), PIDFile: filepath.Join(dir, e.Name())}
		if cl, comp, ok := strings.Cut(r.Component, "."); ok {
			r.Cluster, r.Component = cl, comp
		}
		data, err := os.ReadFile(r.PIDFile)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", r.PIDFile, err)
		}
		r.PID, err = strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || r.PID <= 1 {
			r.Note = fmt.Sprintf("PID file holds %q, not a PID", strings.TrimSpace(string(data)))
			out = append(out, r)
			continue
		}
		r.Alive, r.Note = ProcessMatches(r.PID, r.Component)
		out = append(out, r)
	}
	return out, nil
}

// ProcessMatches reports whether pid is a live (non-zombie) process running a binary named want
// (any binary when want is empty).
func ProcessMatches(pid int, want string) (bool, string) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, "not running"
	}
	// The state follows the parenthesised command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false, "exited (zombie)"
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false, "not running"
	}
	argv0 := strings.SplitN(string(cmdline), "\x00", 2)[0]
	if want != "" && filepath.Base(argv0) != want {
		return false, fmt.Sprintf("PID %d now runs %s, not %s; left alone", pid, filepath.Base(argv0), want)
	}
	return true, ""
}

// Terminate stops a recorded process group: SIGTERM, wait up to grace, then SIGKILL.
func Terminate(r Recorded, grace time.Duration) error {
	_ = syscall.Kill(-r.PID, syscall.SIGTERM)
	_ = syscall.Kill(r.PID, syscall.SIGTERM) // in case it is not a group leader
	if waitGone(r, grace) {
		return nil
	}
	_ = syscall.Kill(-r.PID, syscall.SIGKILL)
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	if waitGone(r, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (PID %d) survived SIGKILL", r.Process(), r.PID)
}

func waitGone(r Recorded, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if alive, _ := ProcessMatches(r.PID, r.Component); !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PortBusy reports whether 127.0.0.1:port cannot be bound, and if so who holds it.
func PortBusy(port int) (bool, string) {
	ln, err := net.Listen("tcp", Loopback(port))
	if err == nil {
		_ = ln.Close()
		return false, ""
	}
	return true, portOwner(port)
}

// portOwner names the process listening on port, from /proc (best effort).
func portOwner(port int) string {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A = LISTEN
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			if p, err := strconv.ParseInt(f[1][i+1:], 16, 32); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return "an unknown process"
	}
	procs, _ := os.ReadDir("/proc")
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && inodes[target] {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				return fmt.Sprintf("PID %d (%s)", pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return "a process this user cannot inspect"
}
