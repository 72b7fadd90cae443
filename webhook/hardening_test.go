package webhook

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/naming"
)

func hyperJobOf(ns, name string, rjs ...trainingv1alpha1.ReplicatedJob) *trainingv1alpha1.HyperJob {
	return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: rjs}}
}

func rjOf(name string, replicas int32, clusters ...string) trainingv1alpha1.ReplicatedJob {
	return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: replicas, ClusterNames: clusters,
		TemplateSpec: batchv1alpha1.JobSpec{Queue: "team-a"}}
}

// TestValidateHyperJobChildCount: the sum of replicas is capped at naming.MaxChildren, with a message
// naming the field, the total and the limit; an UPDATE that does not grow the count is not judged.
func TestValidateHyperJobChildCount(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	v := d.hyperJobValidator()
	huge := hyperJobOf("a", "huge", rjOf("a", 100000, "a"), rjOf("b", 100000, "a"))
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, huge, nil)), http.StatusUnprocessableEntity,
		fmt.Sprintf("spec.replicatedJobs[*].replicas: Invalid value: 200000: the HyperJob would have 200000 child jobs (the sum of spec.replicatedJobs[*].replicas), more than the limit of %d per HyperJob", naming.MaxChildren))

	over := hyperJobOf("a", "over", rjOf("a", naming.MaxChildren/2+1, "a"), rjOf("b", naming.MaxChildren/2, "a"))
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, over, nil)), http.StatusUnprocessableEntity,
		fmt.Sprintf("Invalid value: %d", naming.MaxChildren+1))

	at := hyperJobOf("a", "at", rjOf("a", naming.MaxChildren/2, "a"), rjOf("b", naming.MaxChildren/2, "a"))
	resp := v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, at, nil))
	assert.True(t, resp.Allowed, "a HyperJob at the limit: %v", resp.Result)

	// Scaling up beyond the limit is refused; scaling down a HyperJob already beyond it is not.
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Update, over, at)), http.StatusUnprocessableEntity,
		"more than the limit")
	resp = v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Update, over, huge))
	assert.True(t, resp.Allowed, "scaling down: %v", resp.Result)
}
