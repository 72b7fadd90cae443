// Package localproc starts, watches and stops the processes of hyperbatch's local clusters: the one
// library behind hack/localcluster (`make run`), the integration framework's neighbours
// (test/integration/framework), the e2e suite and the benchmarks.
//
// Its unit is a named Cluster (name, directory, port block, role). Component lists are built by
// functions (KubeCore, Hyperbatch, Volcano, JobSet); a Session starts them stage by stage, records
// the start order in the state file and stops them in the reverse order. Process names and PID
// files carry the cluster's name, so several clusters (a Karmada control plane and its members)
// can share one state file and one kubeconfig.
package localproc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Component is one process: its command line and how to tell it serves.
type Component struct {
	Name   string   // component name: the log file's name, and the executable's base name
	Binary string   // absolute path of the executable
	Args   []string // command-line flags
	Env    []string // extra environment (KEY=value)
	// Ready reports nil once the component serves; it is polled until StartTimeout.
	Ready func(ctx context.Context) error
	// StartTimeout bounds the wait for Ready (default 90s).
	StartTimeout time.Duration
}

// StartOptions say where a process logs and how it is detached.
type StartOptions struct {
	// Process is the name messages use (a cluster's processes are "<cluster>/<component>"); default
	// the component's name.
	Process string
	LogPath string // receives stdout and stderr, after a first line with the command
	PIDPath string // optional: a file holding the PID while the process runs
	Dir     string // working directory; default the caller's
	// Session starts the process in its own session (a terminal's Ctrl-C does not reach it, and it
	// outlives the caller: `make run`); otherwise in its own process group only (tests).
	Session bool
}

// Proc is a started process. Its done channel closes when the process exits.
type Proc struct {
	Component
	Process string // the name messages use
	LogPath string
	PIDPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	onStop  []func()
}

// Start launches c, its output in o.LogPath. It does not wait for Ready (WaitReady does).
func Start(c Component, o StartOptions) (*Proc, error) {
	if o.Process == "" {
		o.Process = c.Name
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 90 * time.Second
	}
	if _, err := os.Stat(c.Binary); err != nil {
		return nil, fmt.Errorf("%s: executable %s is missing (hack/tools.sh %s or make build builds it): %w", o.Process, c.Binary, c.Name, err)
	}
	KeepInheritedFiles()
	p := &Proc{Component: c, Process: o.Process, LogPath: o.LogPath, PIDPath: o.PIDPath, done: make(chan struct{})}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		return nil, fmt.Errorf("creating log file for %s: %w", p.Process, err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if o.Session {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	_, _ = fmt.Fprintf(logFile, "# %s %s\n", c.Binary, strings.Join(c.Args, " "))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", p.Process, c.Binary, err)
	}
	p.cmd = cmd
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if p.PIDPath != "" {
		if err := os.WriteFile(p.PIDPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			_ = p.StopWithin(10 * time.Second)
			return nil, fmt.Errorf("writing PID file of %s: %w", p.Process, err)
		}
	}
	return p, nil
}

// StartReady is Start followed by WaitReady; a process that does not become ready is stopped.
func StartReady(ctx context.Context, c Component, o StartOptions) (*Proc, error) {
	p, err := Start(c, o)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// OnStop registers f to run first when the process is stopped (removing what its start registered
// with an API server, for instance).
func (p *Proc) OnStop(f func()) { p.onStop = append(p.onStop, f) }

// Exited reports whether the process has ended (a crash during a test shows up here).
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitReady polls the component's readiness check until it passes, the process exits, the start
// timeout passes or ctx ends. Failures carry the log path and the log's last lines.
func (p *Proc) WaitReady(ctx context.Context) error {
	if p.Ready == nil {
		return nil
	}
	deadline := time.Now().Add(p.StartTimeout)
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited during start (%s).\n%s", p.Process, exitReason(p.waitErr), p.LogTail(TailLines))
		}
		checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := p.Ready(checkCtx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while waiting for %s (last check: %w)", p.Process, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready within %s (last check: %w).\n%s", p.Process, p.StartTimeout, err, p.LogTail(TailLines))
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

// Stop is StopWithin(10s).
func (p *Proc) Stop() error { return p.StopWithin(10 * time.Second) }

// StopWithin runs the OnStop functions, then ends the process group: SIGTERM, and SIGKILL after
// grace. It removes the PID file. Safe to call twice.
func (p *Proc) StopWithin(grace time.Duration) error {
	if p == nil || p.cmd == nil {
		return nil
	}
	for _, f := range p.onStop {
		f()
	}
	p.onStop = nil
	defer func() {
		if p.PIDPath != "" {
			_ = os.Remove(p.PIDPath)
		}
	}()
	if p.Exited() {
		return nil
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s ignored SIGTERM for %s and was killed (log %s)", p.Process, grace, p.LogPath)
	}
}

// Pid is the process id of the started binary (for /proc readings such as CPU time and peak RSS).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// CPUSeconds is the process's CPU time so far, user + system (/proc/<pid>/stat; 0 when unreadable).
func (p *Proc) CPUSeconds() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks (USER_HZ = 100 on Linux)
}

// PeakRSSKiB is the process's peak resident set size so far (VmHWM in /proc/<pid>/status; 0 when
// unreadable).
func (p *Proc) PeakRSSKiB() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return 0
}

// LogTail returns the last n lines of the process's log, framed with its path.
func (p *Proc) LogTail(n int) string { return LogTail(p.LogPath, n) }

// TailLines is how much of a component's log an error message shows.
const TailLines = 20

// LogTail returns the last n lines of a log file, framed with its path, for error messages.
func LogTail(path string, n int) string {
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
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return fmt.Sprintf("Last %d lines of %s:\n    %s\nRead the whole log: %s", len(lines), path,
		strings.Join(lines, "\n    "), path)
}
