package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func TestUserWroteSpecQueue(t *testing.T) {
	apply := func(fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	update := func(fields string) metav1.ManagedFieldsEntry {
		e := apply(fields)
		e.Operation = metav1.ManagedFieldsOperationUpdate
		return e
	}
	for name, tc := range map[string]struct {
		meta metav1.ObjectMeta
		want bool
	}{
		"nothing known":                {metav1.ObjectMeta{}, false},
		"ssa applied queue":            {metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{apply(`{"f:spec":{"f:queue":{},"f:tasks":{}}}`)}}, true},
		"ssa without queue":            {metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{apply(`{"f:spec":{"f:tasks":{}}}`)}}, false},
		"ssa queue elsewhere":          {metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{apply(`{"f:spec":{"f:tasks":{"f:queue":{}}}}`)}}, false},
		"update owns queue (CRD dflt)": {metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{update(`{"f:spec":{"f:queue":{}}}`)}}, false},
		"last-applied with queue": {metav1.ObjectMeta{Annotations: map[string]string{
			LastAppliedAnnotation: `{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","spec":{"queue":"default"}}`}}, true},
		"last-applied without queue": {metav1.ObjectMeta{Annotations: map[string]string{
			LastAppliedAnnotation: `{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","spec":{"minAvailable":1}}`}}, false},
		"last-applied garbage": {metav1.ObjectMeta{Annotations: map[string]string{LastAppliedAnnotation: `{`}}, false},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, userWroteSpecQueue(&tc.meta)) })
	}
}

// A user-written "default" is kept; the same value without evidence counts as unset and gets the
// policy's queue (the CRD writes "default" for an omitted queue).
func TestVolcanoJobDefaultsKeepUserWrittenDefaultQueue(t *testing.T) {
	pols, err := NewPolicies([]hbv1.WorkloadPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: hbv1.WorkloadPolicySpec{NamespaceSelector: &metav1.LabelSelector{}, Defaults: hbv1.PolicyDefaults{Queue: "team-a", SchedulerName: "hyperbatch-scheduler"}}}})
	require.NoError(t, err)
	ns := Namespace{Name: "ml"}

	written := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		LastAppliedAnnotation: `{"spec":{"queue":"default"}}`}}, Spec: batchv1alpha1.JobSpec{Queue: "default"}}
	res := VolcanoJobAsSubmitted(written, ns, pols)
	assert.Equal(t, "default", written.Spec.Queue)
	assert.Equal(t, "hyperbatch-scheduler", written.Spec.SchedulerName, "other defaults still apply")
	assert.NotContains(t, fillPaths(res), "spec.queue")

	omitted := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{Queue: "default"}}
	res = VolcanoJobAsSubmitted(omitted, ns, pols)
	assert.Equal(t, "team-a", omitted.Spec.Queue)
	assert.Contains(t, fillPaths(res), "spec.queue")

	other := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{Queue: "research"}}
	VolcanoJobAsSubmitted(other, ns, pols)
	assert.Equal(t, "research", other.Spec.Queue, "a queue the user wrote is never overwritten")
}

// fillPaths lists the paths of the fields a defaults call filled.
func fillPaths(res Result) []string {
	paths := make([]string, 0, len(res.Fills))
	for _, f := range res.Fills {
		paths = append(paths, f.Path)
	}
	return paths
}
