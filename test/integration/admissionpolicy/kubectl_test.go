package admissionpolicy

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// TestKubectlApplyPodPolicyMode is the sequence docs/webhooks.md ("kubectl apply twice") describes
// for a Pod, in policy mode: kubectl apply client-side twice, then --server-side twice. The
// server-side apply drops spec.schedulerName, which the apiserver then defaults to
// default-scheduler; the carry-over policy gives the Pod's value back, so no apply is refused as a
// change of an immutable field, and kubectl diff finds nothing.
func TestKubectlApplyPodPolicyMode(t *testing.T) {
	p := profile(t, "kubectl", map[string]string{"team": "a"}, nil)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "pod.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: pod, namespace: "+p.policy+"}\n"+
		"spec:\n  restartPolicy: Never\n  containers: [{name: c, image: registry.example/trainer:v1}]\n"), 0o600))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(env.Config, kubeconfig))
	kubectl := filepath.Join(framework.AssetsDir(), "kubectl")
	run := func(args ...string) (string, error) {
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"apply", "-f", manifest}, {"apply", "-f", manifest},
		{"apply", "--server-side", "-f", manifest}, {"apply", "--server-side", "-f", manifest},
	} {
		out, err := run(args...)
		require.NoError(t, err, "kubectl %v: %s", args, out)
		ctx, cancel := framework.Context(10 * time.Second)
		var pod corev1.Pod
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: p.policy, Name: "pod"}, &pod))
		cancel()
		assert.Equal(t, "hyperbatch-scheduler", pod.Spec.SchedulerName, "after kubectl %v", args)
		assert.Equal(t, "team-a", pod.Annotations[defaults.QueueNameAnnotation], "after kubectl %v", args)
	}
	out, err := run("diff", "--server-side", "-f", manifest)
	assert.NoError(t, err, "kubectl diff --server-side finds nothing: %s", out)
}
