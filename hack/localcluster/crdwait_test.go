package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A CRD the API server has not given a status yet is "not Established yet", never an error (kubectl
// wait failed there with ".status.conditions accessor error").
func TestNotEstablished(t *testing.T) {
	crd := func(name string, conds ...apiextensionsv1.CustomResourceDefinitionCondition) apiextensionsv1.CustomResourceDefinition {
		return apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: conds}}
	}
	items := []apiextensionsv1.CustomResourceDefinition{
		crd("a.x"),
		crd("b.x", apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}),
		crd("c.x", apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse, Message: "plural taken"}),
	}
	got := notEstablished([]string{"a.x", "b.x", "c.x", "d.x"}, items)
	assert.Equal(t, []string{"a.x (no status yet)", "c.x (NamesAccepted=False plural taken)", "d.x (not created yet)"}, got)
	assert.Empty(t, notEstablished([]string{"b.x"}, items))
}

func TestCRDNames(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "crds.yaml")
	require.NoError(t, os.WriteFile(f, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: not-a-crd
---
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
`), 0o600))
	got, err := crdNames([]string{f, f})
	require.NoError(t, err)
	assert.Equal(t, []string{"gadgets.example.com", "widgets.example.com"}, got)
}
