package framework

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// The one log switch of every suite (integration tests and benchmarks): HB_TEST_LOG=stderr sends the
// logs of the controllers, webhooks and in-process schedulers a suite runs to stderr, in
// controller-runtime's development format; HB_TEST_V sets klog's verbosity. Without it, suites stay
// quiet: controller-runtime logs only errors (or nothing, QuietDiscard), and klog-based suites write
// to a file whose tail a failing test prints (LogToFile).
const (
	LogEnv       = "HB_TEST_LOG"
	VerbosityEnv = "HB_TEST_V"
)

// LogsToStderr reports whether HB_TEST_LOG=stderr.
func LogsToStderr() bool { return os.Getenv(LogEnv) == "stderr" }

// Quiet is what a suite logs without HB_TEST_LOG.
type Quiet int

const (
	// QuietErrors logs controller-runtime's errors to stderr.
	QuietErrors Quiet = iota
	// QuietDiscard logs nothing.
	QuietDiscard
)

// SetupLogs sets controller-runtime's logger by the switch: everything to stderr with
// HB_TEST_LOG=stderr, otherwise q.
func SetupLogs(q Quiet) {
	switch {
	case LogsToStderr():
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	case q == QuietDiscard:
		ctrl.SetLogger(logr.Discard())
	default:
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	}
}

// LogToFile routes klog (kube-scheduler's and client-go's logs) and controller-runtime's logger
// (through klog) into dir/<name>, unless HB_TEST_LOG=stderr, where they stay on stderr. It returns
// the log's path ("" on stderr) and a function that closes it.
func LogToFile(dir, name string) (string, func(), error) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if v := os.Getenv(VerbosityEnv); v != "" {
		_ = fs.Set("v", v)
	}
	defer ctrl.SetLogger(klog.NewKlogr())
	if LogsToStderr() {
		return "", func() {}, nil
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		return "", nil, fmt.Errorf("creating the suite log: %w", err)
	}
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(f)
	return path, func() {
		klog.Flush()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "closing %s: %v\n", path, err)
		}
	}, nil
}
