package localproc

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// TrainerPorts are the loopback ports of Kubeflow Trainer's controller manager: probes (/readyz),
// webhook server and status server (v2.3.0 has no flags for them: they are in its configuration).
type TrainerPorts struct{ Health, Webhook, Status int }

// TrainerConfig is Trainer v2.3.0's Configuration (config.trainer.kubeflow.org/v1alpha1) for a process
// outside a cluster: probes, webhook server and status server on the given loopback ports, metrics
// off, no leader election, and its own certificate management off ("certificates must be provided
// externally"), so it neither writes a Secret nor needs one mounted.
func TrainerConfig(p TrainerPorts) string {
	return fmt.Sprintf(`apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: %s
metrics:
  bindAddress: "0"
webhook:
  port: %d
  host: 127.0.0.1
leaderElection:
  leaderElect: false
statusServer:
  port: %d
certManagement:
  enable: false
`, Loopback(p.Health), p.Webhook, p.Status)
}

// TrainerController is Kubeflow Trainer's controller manager (bin/trainer-controller-manager,
// github.com/kubeflow/trainer/v2 as hack/tools/trainer pins it) against the kubeconfig's cluster; its
// TrainJob controller turns TrainJobs into JobSets and, for a runtime with podGroupPolicy.volcano,
// a Volcano PodGroup. The tests (framework.StartTrainerController) and the local cluster (Trainer)
// both run it from here. It writes into dir its configuration (TrainerConfig, trainer-config.yaml)
// and a TMPDIR of its own (trainer-tmp): with certificate management off, its webhook server reads
// controller-runtime's default directory under $TMPDIR, where a self-signed loopback certificate is
// already written, so the server starts at once and two processes never share a directory. No
// webhook configuration names Trainer's webhooks, so the apiserver never calls them: TrainJobs and
// runtimes are admitted without Trainer's defaulting and validation. /readyz passes once its
// controllers and webhook server run.
func TrainerController(bin, kubeconfig, dir string, p TrainerPorts) (Component, error) {
	tmp := filepath.Join(dir, "trainer-tmp")
	if _, err := WriteSelfSignedCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs")); err != nil {
		return Component{}, fmt.Errorf("writing Trainer's webhook certificate: %w", err)
	}
	conf := filepath.Join(dir, "trainer-config.yaml")
	if err := os.WriteFile(conf, []byte(TrainerConfig(p)), 0o600); err != nil {
		return Component{}, fmt.Errorf("writing Trainer's configuration %s: %w", conf, err)
	}
	return Component{
		Name: "trainer-controller-manager", Binary: filepath.Join(bin, "trainer-controller-manager"), StartTimeout: 90 * time.Second,
		Args:  []string{"--kubeconfig=" + kubeconfig, "--config=" + conf, "--zap-log-level=info"},
		Env:   []string{"TMPDIR=" + tmp},
		Ready: HTTPReady(ProbeClient, "http://"+Loopback(p.Health)+"/readyz", ""),
	}, nil
}

// TrainerDir holds the local cluster's Trainer configuration and TMPDIR.
func (c Cluster) TrainerDir() string { return filepath.Join(c.Dir, "trainer") }

// Trainer is the cluster's Kubeflow Trainer controller manager (TrainerController) on the cluster's
// Trainer ports, its files in c.TrainerDir().
func Trainer(c Cluster, bin string) (Stage, error) {
	pt := c.Ports()
	if err := os.MkdirAll(c.TrainerDir(), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", c.TrainerDir(), err)
	}
	tc, err := TrainerController(bin, c.Kubeconfig(), c.TrainerDir(), TrainerPorts{Health: pt.TrainerHealth, Webhook: pt.TrainerWebhook, Status: pt.TrainerStatus})
	if err != nil {
		return nil, err
	}
	return Stage{tc}, nil
}
