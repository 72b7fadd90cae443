package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func TestTrainJobClock(t *testing.T) {
	tj := defaults.NewTrainJob()
	tj.SetCreationTimestamp(metav1.NewTime(at(0)))
	cond := func(typ, status string, s int) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": "r", "lastTransitionTime": at(s).Format(time.RFC3339)}
	}
	assert.WithinDuration(t, at(0), *TrainJobStart(tj), 0)
	assert.Nil(t, TrainJobFinishedAt(tj))

	tj.Object["spec"] = map[string]any{"suspend": true}
	assert.True(t, TrainJobSuspended(tj))
	assert.Nil(t, TrainJobStart(tj), "no clock while suspended")

	// Resumed at 30 s: the clock restarts in full (KEP-2899 as shipped).
	tj.Object["spec"] = map[string]any{"suspend": false}
	tj.Object["status"] = map[string]any{"conditions": []any{cond(TrainJobSuspendedCondition, "False", 30)}}
	assert.WithinDuration(t, at(30), *TrainJobStart(tj), 0)

	tj.Object["status"] = map[string]any{"conditions": []any{cond(TrainJobSuspendedCondition, "False", 30), cond(TrainJobFailed, "True", 90)}}
	assert.WithinDuration(t, at(90), *TrainJobFinishedAt(tj), 0)
	assert.Nil(t, TrainJobStart(tj), "no clock once finished")
	tj.Object["status"] = map[string]any{"conditions": []any{cond(TrainJobComplete, "True", 70)}}
	assert.WithinDuration(t, at(70), *TrainJobFinishedAt(tj), 0)
}
