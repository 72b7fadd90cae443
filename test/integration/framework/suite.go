package framework

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
)

// SuiteOptions describe an integration suite's TestMain.
type SuiteOptions struct {
	// Name prefixes the suite's work directory and its error messages.
	Name string
	// LogFile, when set, routes klog and controller-runtime's logs into this file of the work
	// directory (LogToFile); otherwise SetupLogs(Quiet) sets the logger.
	LogFile string
	Quiet   Quiet
	// Options start the control plane.
	Options Options
	// KubeControllerManager starts kube-controller-manager (StartKubeControllerManager: the garbage
	// collector and KubeControllers) once the control plane serves; it is stopped first. Any
	// KubeControllers start it too.
	KubeControllerManager bool
	KubeControllers       []string
}

// Suite is a started suite: its work directory, log, control plane and a clientset on it.
type Suite struct {
	Dir       string
	LogPath   string // "" when logs go to stderr or no LogFile was asked for
	Env       *Env
	Clientset kubernetes.Interface
	stops     []func()
}

// StartSuite creates the work directory, sets up the logs and starts the control plane.
func StartSuite(o SuiteOptions) (*Suite, error) {
	dir, err := os.MkdirTemp("", o.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the suite's work directory: %w", err)
	}
	s := &Suite{Dir: dir}
	s.stops = append(s.stops, func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing %s: %v\n", dir, err)
		}
	})
	if o.LogFile != "" {
		path, closeLog, err := LogToFile(dir, o.LogFile)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.LogPath = path
		s.stops = append(s.stops, closeLog)
	} else {
		SetupLogs(o.Quiet)
	}
	if s.Env, err = Start(o.Options); err != nil {
		s.Stop()
		return nil, fmt.Errorf("control plane did not start: %w", err)
	}
	s.stops = append(s.stops, func() {
		if err := s.Env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
		}
	})
	if s.Clientset, err = kubernetes.NewForConfig(s.Env.Config); err != nil {
		s.Stop()
		return nil, fmt.Errorf("clientset: %w", err)
	}
	if o.KubeControllerManager || len(o.KubeControllers) > 0 {
		kcm, err := StartKubeControllerManager(s.Env, o.KubeControllers...)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("kube-controller-manager (garbage collector %v): %w", o.KubeControllers, err)
		}
		s.stops = append(s.stops, kcm.Stop)
	}
	return s, nil
}

// Stop stops the control plane and removes the work directory, last started first.
func (s *Suite) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// RunSuite is a TestMain body: it starts the suite, calls run (which runs the tests and returns their
// exit code), stops the suite and returns the exit code (1 when anything failed to start).
func RunSuite(o SuiteOptions, run func(*Suite) (int, error)) int {
	s, err := StartSuite(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
		return 1
	}
	defer s.Stop()
	code, err := run(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
		return 1
	}
	return code
}
