//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// What a user does: kubectl apply a Volcano Job without queue or priority, twice client-side and twice
// server-side; the policy's defaults are there after every apply and kubectl diff shows nothing.
func TestKubectlApplyKeepsDefaults(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	ensureQueue(t, "team-k") // Volcano's job validation refuses a Job whose queue is missing
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-kubectl-" + ns}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		Defaults:          hbv1.PolicyDefaults{Queue: "team-k", SchedulerName: "hyperbatch-scheduler"}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: train
  namespace: %s
spec:
  minAvailable: 1
  tasks:
  - name: worker
    replicas: 1
    # What Volcano's mutating webhook fills into every task on create. Without them the re-applies
    # below would send a tasks list without them, which Volcano's validation refuses as a change of
    # the Job, and a server-side apply would conflict on the atomic .spec.tasks (docs/webhooks.md).
    minAvailable: 1
    maxRetry: 3
    template:
      spec:
        restartPolicy: Never
%s        containers:
        - name: c
          image: %s
`, ns, e2efw.Workload().PodSpecYAML(8), e2efw.Workload().Image)), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		var j batchv1alpha1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train"}, &j); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if j.Spec.Queue != "team-k" || j.Spec.SchedulerName != "hyperbatch-scheduler" {
			t.Errorf("%s: queue=%q schedulerName=%q, want the policy's team-k / hyperbatch-scheduler", step, j.Spec.Queue, j.Spec.SchedulerName)
		}
	}
	// The webhook reads policies from its informer: the first apply may race the new policy.
	e2efw.Poll(t, 30*time.Second, "the webhook to default the first apply", func(ctx context.Context) (bool, error) {
		if out, err := primary.Kubectl("apply", "-f", manifest); err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		var j batchv1alpha1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train"}, &j); err != nil {
			return false, err
		}
		if j.Spec.Queue == "team-k" {
			return true, nil
		}
		_, _ = primary.Kubectl("delete", "-f", manifest, "--wait")
		return false, nil
	})
	steps := [][]string{
		{"apply", "-f", manifest},
		{"apply", "--server-side", "-f", manifest},
		{"apply", "--server-side", "-f", manifest},
	}
	for _, s := range steps {
		if out, err := primary.Kubectl(s...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(s, " "), err, out)
		}
		check("after kubectl " + strings.Join(s, " "))
	}
	for _, d := range [][]string{{"diff", "-f", manifest}, {"diff", "--server-side", "-f", manifest}} {
		out, err := primary.Kubectl(d...)
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			t.Errorf("kubectl %s shows a difference after the applies:\n%s", strings.Join(d, " "), out)
		} else if err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(d, " "), err, out)
		}
	}
}
