package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallEnv says how hyperbatch runs in the cluster under test: "process" (the default: the local
// cluster's manager and scheduler are host processes) or "chart" (they are the pods of the Helm
// release ChartRelease in ChartNamespace: hack/localcluster up --real-nodes 2 --chart, or
// `make run REAL_NODES=2 CHART=1`). The chart checks (test/e2e/chart_test.go) delete those pods and
// upgrade and uninstall the release; they run only in chart mode.
const InstallEnv = "HYPERBATCH_E2E_INSTALL"

// Install is a value of InstallEnv.
type Install string

const (
	// ProcessInstall means the manager and scheduler are host processes (hack/localcluster's default).
	ProcessInstall Install = "process"
	// ChartInstall means the manager and scheduler are the pods of `helm install charts/hyperbatch`.
	ChartInstall Install = "chart"
)

// The release chart mode installs (hack/localcluster/chart.go).
const (
	ChartRelease   = "hyperbatch"
	ChartNamespace = "hyperbatch-system"
)

// ParseInstall reads InstallEnv's value ("" is process).
func ParseInstall(v string) (Install, error) {
	switch Install(v) {
	case "", ProcessInstall:
		return ProcessInstall, nil
	case ChartInstall:
		return ChartInstall, nil
	}
	return "", fmt.Errorf("%s=%q: want %q (host processes, the default) or %q (the Helm release %s/%s)", InstallEnv, v, ProcessInstall, ChartInstall, ChartNamespace, ChartRelease)
}

// Installed is the install choice of this run (InstallEnv). Setup has already refused a bad value.
func Installed() Install {
	i, err := ParseInstall(os.Getenv(InstallEnv))
	if err != nil {
		panic(err)
	}
	return i
}

// SkipUnlessChart skips t unless hyperbatch runs from its Helm chart (InstallEnv=chart). why names
// what the check does to the release.
func SkipUnlessChart(t interface {
	Helper()
	Skipf(string, ...any)
}, why string) {
	t.Helper()
	if i := Installed(); i != ChartInstall {
		t.Skipf("%s=%s: this check needs hyperbatch installed by its Helm chart (%s); run it with %s=%s %s=%s against `make run REAL_NODES=2 CHART=1` (%s=_output/local/kubeconfig)",
			InstallEnv, i, why, InstallEnv, ChartInstall, NodesEnv, RealNodes, KubeconfigEnv)
	}
}

// checkInstall fails in chart mode when the cluster has no Deployment of the release.
func checkInstall(ctx context.Context, c client.Client, i Install) error {
	if i != ChartInstall {
		return nil
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ChartNamespace, Name: "hyperbatch-manager"}, &d); err != nil {
		return fmt.Errorf("%s=%s: reading Deployment %s/hyperbatch-manager: %w; start the cluster with `make run REAL_NODES=2 CHART=1`", InstallEnv, i, ChartNamespace, err)
	}
	if d.Labels["app.kubernetes.io/managed-by"] != "Helm" || d.Labels["app.kubernetes.io/instance"] != ChartRelease {
		return fmt.Errorf("%s=%s: Deployment %s/hyperbatch-manager is not of the Helm release %s (labels %v)", InstallEnv, i, ChartNamespace, ChartRelease, d.Labels)
	}
	return nil
}

// Helm runs the project-built helm (bin/helm) against the cluster.
func (cl *Cluster) Helm(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(BinDir(), "helm"), append(args, "--kubeconfig", cl.Kubeconfig, "--kube-context", cl.Context)...)
	cmd.Dir = RepoRoot()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// ChartDir is the chart in this checkout.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "hyperbatch") }
