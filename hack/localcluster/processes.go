package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// component is one process of the local cluster.
type component struct {
	Name   string   // log and PID file name
	Binary string   // absolute path of the executable
	Args   []string // command-line flags
	Env    []string // extra environment (KEY=value)
	// Ready reports nil once the component serves; it is polled until the start timeout.
	Ready func(ctx context.Context) error
	// StartTimeout bounds the wait for Ready.
	StartTimeout time.Duration
}

// proc is a component this run started. done closes when the process exits (we are its parent while
// `up` runs; afterwards init adopts it).
type proc struct {
	component
	cmd     *exec.Cmd
	logPath string
	pidPath string
	done    chan struct{}
	waitErr error
}

// start launches c detached (own session, so a terminal's Ctrl-C does not reach it), logging to
// <dir>/logs/<name>.log and recording its PID in <dir>/pids/<name>.pid.
func (l layout) start(c component) (*proc, error) {
	p := &proc{component: c, logPath: l.logFile(c.Name), pidPath: l.pidFile(c.Name), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log file for %s: %w", c.Name, err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Dir = l.root
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	_, _ = fmt.Fprintf(logFile, "# %s %s\n", c.Binary, strings.Join(c.Args, " "))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", c.Name, c.Binary, err)
	}
	p.cmd = cmd
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := os.WriteFile(p.pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		p.stop(10 * time.Second)
		return nil, fmt.Errorf("writing PID file of %s: %w", c.Name, err)
	}
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls the component's readiness check until it passes, the process exits, the start
// timeout passes or ctx ends. Failures carry the log path and the log's last lines.
func (p *proc) waitReady(ctx context.Context) error {
	if p.Ready == nil {
		return nil
	}
	deadline := time.Now().Add(p.StartTimeout)
	var lastErr error
	for {
		if p.exited() {
			return fmt.Errorf("%s exited during start (%s).\n%s", p.Name, exitReason(p.waitErr), logTail(p.logPath))
		}
		checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		lastErr = p.Ready(checkCtx)
		cancel()
		if lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while waiting for %s", p.Name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready within %s (last check: %w).\n%s", p.Name, p.StartTimeout, lastErr, logTail(p.logPath))
		}
		select {
		case <-ctx.Done():
		case <-p.done:
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stop ends the process group this run started: SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p.cmd == nil || p.exited() {
		_ = os.Remove(p.pidPath)
		return
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
	_ = os.Remove(p.pidPath)
}

// tailLines is how much of a component's log an error message shows.
const tailLines = 20

// logTail returns the last lines of a log file, framed with its path, for error messages.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > tailLines {
			lines = lines[1:]
		}
	}
	return fmt.Sprintf("Last %d lines of %s:\n    %s\nRead the whole log: %s", len(lines), path,
		strings.Join(lines, "\n    "), path)
}

// --- processes recorded in PID files (used by down and status, which did not start them) ---

// recordedProc is a PID file and what it points to.
type recordedProc struct {
	Name    string
	PIDFile string
	PID     int
	// Alive is true when the PID runs the binary the file names (guards against PID reuse).
	Alive bool
	// Note explains a stale or reused PID.
	Note string
}

// expectedBinary maps a component name to the base name of its executable.
var expectedBinary = map[string]string{
	"etcd": "etcd", "kube-apiserver": "kube-apiserver", "kube-controller-manager": "kube-controller-manager",
	"kwok": "kwok", "manager": "manager", "scheduler": "scheduler",
	"vc-controller-manager": "vc-controller-manager", "vc-webhook-manager": "vc-webhook-manager",
	"jobset-controller": "jobset-controller",
}

func (l layout) recordedProcs() ([]recordedProc, error) {
	entries, err := os.ReadDir(l.pidsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", l.pidsDir(), err)
	}
	var out []recordedProc
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		rp := recordedProc{Name: strings.TrimSuffix(e.Name(), ".pid"), PIDFile: filepath.Join(l.pidsDir(), e.Name())}
		data, err := os.ReadFile(rp.PIDFile)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", rp.PIDFile, err)
		}
		rp.PID, err = strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || rp.PID <= 1 {
			rp.Note = fmt.Sprintf("PID file holds %q, not a PID", strings.TrimSpace(string(data)))
			out = append(out, rp)
			continue
		}
		rp.Alive, rp.Note = processMatches(rp.PID, expectedBinary[rp.Name])
		out = append(out, rp)
	}
	return out, nil
}

// processMatches reports whether pid is a live (non-zombie) process running a binary named want.
func processMatches(pid int, want string) (bool, string) {
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

// terminate stops a recorded process group: SIGTERM, wait up to grace, then SIGKILL.
func terminate(rp recordedProc, grace time.Duration) error {
	_ = syscall.Kill(-rp.PID, syscall.SIGTERM)
	_ = syscall.Kill(rp.PID, syscall.SIGTERM) // in case it is not a group leader
	if waitGone(rp, grace) {
		return nil
	}
	_ = syscall.Kill(-rp.PID, syscall.SIGKILL)
	_ = syscall.Kill(rp.PID, syscall.SIGKILL)
	if waitGone(rp, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (PID %d) survived SIGKILL", rp.Name, rp.PID)
}

func waitGone(rp recordedProc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if alive, _ := processMatches(rp.PID, expectedBinary[rp.Name]); !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --- ports ---

// portBusy reports whether 127.0.0.1:port cannot be bound, and if so who holds it.
func portBusy(port int) (bool, string) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
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
