package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// A chart pod that cannot get its image fails the install with the image's name.
func TestPodImageErrorNamesTheImage(t *testing.T) {
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "hyperbatch-manager-a"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Image: realHyperbatchImage, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	creating := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "hyperbatch-manager-b"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Image: realHyperbatchImage, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	if err := podImageError([]corev1.Pod{running, creating}); err != nil {
		t.Fatalf("running and creating pods: %v", err)
	}
	missing := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "hyperbatch-scheduler-c"}, Spec: corev1.PodSpec{NodeName: "real-node-1"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Image: "hyperbatch.local/hyperbatch:other", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ErrImageNeverPull", Message: `Container image "hyperbatch.local/hyperbatch:other" is not present with pull policy of Never`}}}}}}
	err := podImageError([]corev1.Pod{running, missing})
	if err == nil || !strings.Contains(err.Error(), "image hyperbatch.local/hyperbatch:other") || !strings.Contains(err.Error(), "make images") || !strings.Contains(err.Error(), "hyperbatch-scheduler-c") {
		t.Fatalf("want an error naming the pod, the image and make images, got %v", err)
	}
}

// The values put make images' image, never pulled, on the real nodes.
func TestChartValues(t *testing.T) {
	var v struct {
		Image        struct{ Repository, Tag, PullPolicy string }
		NodeSelector map[string]string `json:"nodeSelector"`
	}
	if err := yaml.Unmarshal([]byte(chartValues()), &v); err != nil {
		t.Fatal(err)
	}
	if got := v.Image.Repository + ":" + v.Image.Tag; got != realHyperbatchImage || v.Image.PullPolicy != "Never" {
		t.Errorf("image %s pullPolicy %q, want %s Never", got, v.Image.PullPolicy, realHyperbatchImage)
	}
	if v.NodeSelector[realNodeLabel] != realNodeLabelValue || len(v.NodeSelector) != 1 {
		t.Errorf("nodeSelector %v, want only %s=%s", v.NodeSelector, realNodeLabel, realNodeLabelValue)
	}
}

// A Lease holder names a live pod of the release, or nobody.
func TestHolderPod(t *testing.T) {
	now := metav1.Now()
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "hyperbatch-manager-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hyperbatch-manager-b", DeletionTimestamp: &now}},
	}
	for holder, want := range map[string]string{
		"hyperbatch-manager-a_0c9e": "hyperbatch-manager-a",
		"hyperbatch-manager-b_77aa": "", // terminating
		"somewhere-else_1234":       "",
		"":                          "",
	} {
		if got := holderPod(holder, pods); got != want {
			t.Errorf("holderPod(%q) = %q, want %q", holder, got, want)
		}
	}
}

// --chart without real nodes is refused before anything starts.
func TestChartNeedsRealNodes(t *testing.T) {
	l, err := newLayout(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = up(context.Background(), l, upOptions{nodes: 4, chart: true})
	if !errors.Is(err, errChartNeedsRealNodes) {
		t.Fatalf("up --chart without --real-nodes: %v, want %v", err, errChartNeedsRealNodes)
	}
}
