package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Two replicas of the real scheduler binary, with the chart's configuration and roles (impersonating
// its ServiceAccount, so every request goes through the chart's RBAC): one holds the Lease
// hyperbatch-scheduler in the release namespace, the other takes over when the leader stops, and the
// apiserver refuses neither of them anything (its Lease, informers, delegated authentication).
func TestSchedulerLeaderElection(t *testing.T) {
	e := env(t)
	apply(t, rbacObjects(t), false)
	var cm corev1.ConfigMap
	require.True(t, find(t, render(t), "ConfigMap", "hyperbatch-scheduler-config", &cm))
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(impersonating(t, "hyperbatch-scheduler"), kubeconfig))
	var conf map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &conf))
	conf["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	raw, err := json.Marshal(conf)
	require.NoError(t, err)
	config := filepath.Join(dir, "scheduler-config.yaml")
	require.NoError(t, os.WriteFile(config, raw, 0o600))

	ctx := context.Background()
	var procs []*framework.Process
	for i := range 2 {
		p, err := framework.StartScheduler(ctx, framework.NeighbourOptions{Kubeconfig: kubeconfig, LogDir: filepath.Join(dir, fmt.Sprint(i))}, config)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Stop() })
		procs = append(procs, p)
	}
	log := func(p *framework.Process) string {
		b, _ := os.ReadFile(p.LogPath)
		return string(b)
	}
	// client-go's leader election logs `"Successfully acquired lease" lock="<namespace>/<name>"` (a
	// structured line since 1.36; before, "successfully acquired lease <namespace>/<name>").
	lock := namespace + "/hyperbatch-scheduler"
	acquired := func(log string) bool {
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(strings.ToLower(line), "successfully acquired lease") && strings.Contains(line, lock) {
				return true
			}
		}
		return false
	}
	leader := func() (*framework.Process, string) {
		var l coordinationv1.Lease
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "hyperbatch-scheduler"}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return nil, ""
		}
		var found *framework.Process
		for _, p := range procs {
			if !p.Exited() && acquired(log(p)) {
				if found != nil {
					return nil, "" // two leaders: keep waiting, and fail below if it lasts
				}
				found = p
			}
		}
		return found, *l.Spec.HolderIdentity
	}
	var first *framework.Process
	var firstID string
	framework.Eventually(t, 60*time.Second, "one scheduler replica holding the Lease", func(context.Context) (bool, error) {
		first, firstID = leader()
		return first != nil, nil
	})
	require.NoError(t, first.Stop())
	framework.Eventually(t, 60*time.Second, "the other replica taking the Lease over", func(context.Context) (bool, error) {
		p, id := leader()
		return p != nil && p != first && id != firstID, nil
	})
	for _, p := range procs {
		for _, line := range strings.Split(log(p), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("the apiserver refused the scheduler (%s): %s", p.LogPath, line)
			}
		}
	}
}
