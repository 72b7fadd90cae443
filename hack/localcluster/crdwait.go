package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitCRDsEstablished polls the API server until every CRD defined in files is Established. It
// replaces `kubectl wait --for=condition=Established crd --all`, which fails with
// ".status.conditions accessor error" when it meets a CRD the API server has not given a status yet.
// A CRD without status (or not listed yet) is simply not Established yet.
func waitCRDsEstablished(ctx context.Context, kubeconfig string, files []string, timeout time.Duration) error {
	want, err := crdNames(files)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	s := runtime.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("creating API client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var pending []string
	var lastErr error
	for {
		var list apiextensionsv1.CustomResourceDefinitionList
		if lastErr = c.List(ctx, &list); lastErr == nil {
			pending = notEstablished(want, list.Items)
			if len(pending) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("listing CRDs: %w", lastErr)
			}
			return fmt.Errorf("%d CRD(s) not Established after %v: %s", len(pending), timeout, strings.Join(pending, "; "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// notEstablished describes the wanted CRDs that are missing or not Established, with their
// conditions when they have some.
func notEstablished(want []string, items []apiextensionsv1.CustomResourceDefinition) []string {
	byName := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	var out []string
	for _, name := range want {
		crd := byName[name]
		if crd == nil {
			out = append(out, name+" (not created yet)")
			continue
		}
		established := false
		var conds []string
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
			if c.Status != apiextensionsv1.ConditionTrue {
				conds = append(conds, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
			}
		}
		switch {
		case established:
		case len(crd.Status.Conditions) == 0:
			out = append(out, name+" (no status yet)")
		default:
			out = append(out, name+" ("+strings.Join(conds, ", ")+")")
		}
	}
	return out
}

// crdNames reads the names of the CustomResourceDefinitions in the YAML files (multi-document).
func crdNames(files []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var doc struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := dec.Decode(&doc); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("parsing %s: %w", f, err)
			}
			if doc.Kind == "CustomResourceDefinition" && doc.Metadata.Name != "" {
				seen[doc.Metadata.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
