package webhookoutage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// volcanoSchedulerManager is the field manager of vc-scheduler's writes (its binary's name).
const volcanoSchedulerManager = "vc-scheduler"

// volcanoWritesStatus: with hyperbatch stopped, Volcano's own scheduler writes the status of the
// PodGroups of a governed and an ungoverned namespace: it enqueues them (phase Inqueue) with a plain
// update of the whole PodGroup, which the webhooks' matchConditions keep away from hyperbatch.
func volcanoWritesStatus(t *testing.T, keys ...client.ObjectKey) {
	t.Helper()
	framework.StartVolcanoForTest(t, w.Config)
	for _, key := range keys {
		var pg schedulingv1beta1.PodGroup
		framework.Eventually(t, 90*time.Second, "Volcano's scheduler to write the status of PodGroup "+key.String(), func(ctx context.Context) (bool, error) {
			pg = schedulingv1beta1.PodGroup{}
			if err := w.Client.Get(ctx, key, &pg); err != nil {
				return false, err
			}
			if pg.Status.Phase != schedulingv1beta1.PodGroupInqueue {
				return false, nil
			}
			for _, mf := range pg.ManagedFields {
				if mf.Manager == volcanoSchedulerManager && mf.Operation == metav1.ManagedFieldsOperationUpdate &&
					mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:phase"`) {
					return true, nil
				}
			}
			return false, fmt.Errorf("PodGroup %s is Inqueue, but not by an update of %s: %+v", key, volcanoSchedulerManager, pg.ManagedFields)
		})
	}
}
