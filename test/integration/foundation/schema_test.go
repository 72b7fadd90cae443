package foundation

import (
	"context"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// schemaKinds are the custom resources whose Go types hyperbatch compiles against and reads.
var schemaKinds = []client.Object{
	&hbv1.WorkloadPolicy{},
	&topologyv1alpha1.HyperNode{},
	&schedulingv1beta1.PodGroup{},
	&schedulingv1beta1.Queue{},
	&batchv1alpha1.Job{},
	&busv1alpha1.Command{},
	&trainingv1alpha1.HyperJob{},
	&jobsetv1alpha2.JobSet{},
	&policyv1alpha1.PropagationPolicy{},
}

// olderCRDGaps are fields of our compiled k8s.io/api (v0.36) that an upstream CRD generated from an older
// k8s.io/api lacks, so the apiserver prunes them: JobSet v0.11.0's CRD is generated from v0.35 and lacks
// the pod field of 1.36 (spec.schedulingGroup, the upstream Workload API). hyperbatch does not read it
// from a JobSet; listing it exactly keeps any other gap failing.
var olderCRDGaps = map[string][]string{
	"JobSet": {
		"spec.replicatedJobs[].template.spec.template.spec.schedulingGroup",
	},
}

// The schema the apiserver serves for each kind carries every JSON field of the Go type, at every
// depth. A field missing from the schema is pruned on write (Go clients, kubectl --validate=false) or
// refused (kubectl's strict field validation), so code reading it would silently see its zero value:
// this is how a HyperNode's spec.tierName and a PodGroup's networkTopology.highestTierName were lost
// when the CRDs came from volcano.sh/volcano's YAML instead of the volcano.sh/apis types.
func TestInstalledSchemasCoverGoTypes(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	for _, obj := range schemaKinds {
		gvk, err := apiutil.GVKForObject(obj, schemaClient(t).Scheme())
		require.NoError(t, err)
		t.Run(gvk.Kind, func(t *testing.T) {
			schema := servedSchema(ctx, t, obj)
			typ := reflect.TypeOf(obj).Elem()
			var missing []string
			for _, top := range []string{"spec", "status"} {
				f, ok := jsonField(typ, top)
				if !ok {
					continue
				}
				sub, ok := schema.Properties[top]
				if !ok {
					missing = append(missing, top)
					continue
				}
				missing = append(missing, uncovered(f.typ, &sub, top, map[reflect.Type]bool{})...)
			}
			missing = slices.DeleteFunc(missing, func(f string) bool { return slices.Contains(olderCRDGaps[gvk.Kind], f) })
			sort.Strings(missing)
			assert.Empty(t, missing, "%s: fields of %s missing from the installed CRD's schema (regenerate it from the Go types: hack/crds.sh)", gvk, typ)
		})
	}
}

// The named fields the scheduler depends on, and the defaults it must not get: with the old CRDs,
// `{mode: hard}` was stored as highestTierAllowed 1 and a highestTierName gang was pinned to tier 1.
func TestTopologyFieldsInSchema(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	hn := servedSchema(ctx, t, &topologyv1alpha1.HyperNode{})
	require.Contains(t, hn.Properties["spec"].Properties, "tierName", "HyperNode spec.tierName")

	pg := servedSchema(ctx, t, &schedulingv1beta1.PodGroup{})
	nt, ok := pg.Properties["spec"].Properties["networkTopology"]
	require.True(t, ok, "PodGroup spec.networkTopology")
	require.Contains(t, nt.Properties, "highestTierName", "PodGroup spec.networkTopology.highestTierName")
	require.Contains(t, nt.Properties, "highestTierAllowed", "PodGroup spec.networkTopology.highestTierAllowed")
	assert.Nil(t, nt.Properties["highestTierAllowed"].Default, "highestTierAllowed must not be defaulted")
	assert.Nil(t, nt.Properties["highestTierName"].Default, "highestTierName must not be defaulted")

	// Volcano's PodGroup has no status subresource upstream (its controllers write status with plain
	// updates); the generated CRD keeps that. HyperNode, Queue and Job have one.
	crd := servedCRD(ctx, t, &schedulingv1beta1.PodGroup{})
	if sr := crd.Spec.Versions[0].Subresources; sr != nil {
		assert.Nil(t, sr.Status, "PodGroup must have no status subresource (as upstream)")
	}
	for _, o := range []client.Object{&topologyv1alpha1.HyperNode{}, &schedulingv1beta1.Queue{}, &batchv1alpha1.Job{}} {
		c := servedCRD(ctx, t, o)
		v := c.Spec.Versions[0]
		if assert.NotNil(t, v.Subresources, "%s subresources", c.Name) {
			assert.NotNil(t, v.Subresources.Status, "%s status subresource", c.Name)
		}
	}
}

func servedCRD(ctx context.Context, t *testing.T, obj client.Object) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, schemaClient(t).Scheme())
	require.NoError(t, err)
	m, err := schemaClient(t).RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err, "kind %s not served", gvk)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, schemaClient(t).Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + gvk.Group}, crd))
	return crd
}

// schemaClient reads CRDs and knows the kinds of schemaKinds (the shared scheme lacks apiextensions
// and Volcano's bus group).
func schemaClient(t *testing.T) client.Client {
	t.Helper()
	schemaClientOnce.Do(func() {
		s := scheme.New()
		if err := apiextensionsv1.AddToScheme(s); err != nil {
			schemaClientErr = err
			return
		}
		if err := busv1alpha1.AddToScheme(s); err != nil {
			schemaClientErr = err
			return
		}
		schemaClientV, schemaClientErr = client.New(env.Config, client.Options{Scheme: s})
	})
	require.NoError(t, schemaClientErr)
	return schemaClientV
}

var (
	schemaClientOnce sync.Once
	schemaClientV    client.Client
	schemaClientErr  error
)

// servedSchema is the installed CRD's schema for the object's version.
func servedSchema(ctx context.Context, t *testing.T, obj client.Object) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, schemaClient(t).Scheme())
	require.NoError(t, err)
	crd := servedCRD(ctx, t, obj)
	for _, v := range crd.Spec.Versions {
		if v.Name == gvk.Version {
			require.NotNil(t, v.Schema, "%s has no schema", crd.Name)
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("CRD %s does not serve version %s", crd.Name, gvk.Version)
	return nil
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	objectMetaT   = reflect.TypeOf(metav1.ObjectMeta{})
	rawExtension  = reflect.TypeOf(runtime.RawExtension{})
)

// uncovered lists the JSON paths under typ that schema does not describe. Types with their own JSON
// encoding (Quantity, Time, IntOrString, RawExtension) are leaves; an embedded ObjectMeta must keep
// labels and annotations; a schema that preserves unknown fields covers everything below it.
func uncovered(typ reflect.Type, schema *apiextensionsv1.JSONSchemaProps, path string, seen map[reflect.Type]bool) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if schema.XPreserveUnknownFields != nil && *schema.XPreserveUnknownFields {
		return nil
	}
	if typ == objectMetaT {
		// An embedded ObjectMeta (pod templates) must keep at least labels and annotations, or the
		// apiserver prunes them (controller-gen's generateEmbeddedObjectMeta).
		var out []string
		for _, f := range []string{"labels", "annotations"} {
			if _, ok := schema.Properties[f]; !ok {
				out = append(out, path+"."+f)
			}
		}
		return out
	}
	if typ == rawExtension || reflect.PointerTo(typ).Implements(jsonMarshaler) || reflect.PointerTo(typ).Implements(textMarshaler) {
		return nil
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 { // []byte: base64 string
			return nil
		}
		if schema.Items == nil || schema.Items.Schema == nil {
			return []string{path + "[] (no item schema)"}
		}
		return uncovered(typ.Elem(), schema.Items.Schema, path+"[]", seen)
	case reflect.Map:
		if schema.AdditionalProperties == nil || schema.AdditionalProperties.Schema == nil {
			if schema.AdditionalProperties != nil && schema.AdditionalProperties.Allows {
				return nil
			}
			return []string{path + "{} (no value schema)"}
		}
		return uncovered(typ.Elem(), schema.AdditionalProperties.Schema, path+"{}", seen)
	case reflect.Struct:
	default:
		return nil
	}
	if seen[typ] { // recursive types (none today) end here
		return nil
	}
	seen[typ] = true
	defer delete(seen, typ)
	var out []string
	for _, f := range jsonFields(typ) {
		sub, ok := schema.Properties[f.name]
		if !ok {
			out = append(out, path+"."+f.name)
			continue
		}
		out = append(out, uncovered(f.typ, &sub, path+"."+f.name, seen)...)
	}
	return out
}

type field struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the struct's JSON fields as encoding/json sees them (inline and embedded structs
// flattened, "-" skipped).
func jsonFields(typ reflect.Type) []field {
	var out []field
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{name: name, typ: f.Type})
	}
	return out
}

// jsonField finds a top-level JSON field of typ.
func jsonField(typ reflect.Type, name string) (field, bool) {
	for _, f := range jsonFields(typ) {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}
