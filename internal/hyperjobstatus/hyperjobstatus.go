// Package hyperjobstatus holds the vocabulary of a HyperJob's terminal status conditions, which
// controllers/hyperjob writes and controllers/lifecycle reads (controllers never import each other).
package hyperjobstatus

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

const (
	// ConditionCompleted is True once minAvailable children (all by default) have completed. Terminal.
	ConditionCompleted = "Completed"
	// ConditionFailed is True once every child has finished and fewer than minAvailable completed,
	// or once the HyperJob's active deadline passed. Terminal.
	ConditionFailed = "Failed"
)

// IsFinished reports whether the HyperJob has a terminal condition (Completed or Failed True).
func IsFinished(st *trainingv1alpha1.HyperJobStatus) bool {
	return apimeta.IsStatusConditionTrue(st.Conditions, ConditionCompleted) ||
		apimeta.IsStatusConditionTrue(st.Conditions, ConditionFailed)
}
