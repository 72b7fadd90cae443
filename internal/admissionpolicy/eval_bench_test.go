package admissionpolicy_test

import (
	"context"
	"testing"

	"github.com/google/cel-go/cel"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// BenchmarkPodPolicies evaluates each of the Pod CREATE policies on a bare Pod the way
// kube-apiserver's admission plugins do (k8s.io/apiserver's CEL composition, the JSON patcher, the
// validator's message expressions), in process: the CPU each policy costs one Pod, without the
// apiserver around it. The namespace's params are the bench namespace's of bench/webhook (a queue,
// a PriorityClass and a scheduler by default, one allowed queue). BenchmarkAdmissionModes
// (bench/webhook) measures the same policies inside a real kube-apiserver.
func BenchmarkPodPolicies(b *testing.B) {
	pols, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "bench"}},
		Defaults:          hbv1.PolicyDefaults{Queue: "bench", PriorityClassName: "batch-normal", SchedulerName: "hyperbatch-scheduler"},
		AllowedQueues:     []string{"bench"},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{"team": "bench"}}}
	data, err := admissionpolicy.Params(defaults.Namespace{Name: ns.Name, Labels: ns.Labels}, pols, func(name string) (*schedulingv1.PriorityClass, error) {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	params := admissionpolicy.ParamsObject(ns.Name, data)
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns.Name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}

	var created runtime.Object = pod
	for _, o := range admissionpolicy.Objects(admissionpolicy.Options{}) {
		switch p := o.(type) {
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			if p.Name != admissionpolicy.CreatePolicyName(defaults.KindPod) {
				continue
			}
			c, patcher := compileJSONPatch(b, p)
			// The validating policies judge the Pod as this mutation leaves it.
			out, err := patcher.Patch(c.CreateContext(context.Background()), patchRequest(pod, ns, params), celconfig.RuntimeCELCostBudget)
			if err != nil {
				b.Fatal(err)
			}
			created = out
			b.Run(p.Name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					// As the mutating dispatcher: one composition context (the variables) per call.
					if _, err := patcher.Patch(c.CreateContext(context.Background()), patchRequest(pod, ns, params), celconfig.RuntimeCELCostBudget); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	for _, o := range admissionpolicy.Objects(admissionpolicy.Options{}) {
		p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if !ok || (p.Name != admissionpolicy.CheckPolicyName(defaults.KindPod) && p.Name != admissionpolicy.WarnPolicyName(defaults.KindPod)) {
			continue
		}
		validations, messages := compileValidations(b, p)
		b.Run(p.Name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				attr := versioned(created, ns)
				req := plugincel.CreateAdmissionRequest(attr.Attributes, metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"})
				vars := plugincel.OptionalVariableBindings{VersionedParams: params}
				res, left, err := validations.ForInput(context.Background(), attr, req, vars, ns, celconfig.RuntimeCELCostBudget)
				if err != nil {
					b.Fatal(err)
				}
				failed := false
				for _, r := range res {
					if r.Error != nil {
						b.Fatal(r.Error)
					}
					failed = failed || r.EvalResult.Value() != true
				}
				if failed {
					if _, _, err := messages.ForInput(context.Background(), attr, req, vars, ns, left); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func compiler(b *testing.B, vars []admissionregistrationv1.Variable) *plugincel.CompositedCompiler {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		b.Fatal(err)
	}
	named := make([]plugincel.NamedExpressionAccessor, len(vars))
	for i := range vars {
		named[i] = &variable{vars[i]}
	}
	c.CompileAndStoreVariables(named, plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}, environment.StoredExpressions)
	return c
}

func compileJSONPatch(b *testing.B, p *admissionregistrationv1.MutatingAdmissionPolicy) (*plugincel.CompositedCompiler, patch.Patcher) {
	c := compiler(b, p.Spec.Variables)
	ev := c.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: p.Spec.Mutations[0].JSONPatch.Expression},
		plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true, HasPatchTypes: true}, environment.StoredExpressions)
	if errs := ev.CompilationErrors(); len(errs) > 0 {
		b.Fatal(errs)
	}
	return c, patch.NewJSONPatcher(ev)
}

func compileValidations(b *testing.B, p *admissionregistrationv1.ValidatingAdmissionPolicy) (validations, messages plugincel.ConditionEvaluator) {
	c := compiler(b, p.Spec.Variables)
	var vs, ms []plugincel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		vs = append(vs, &condition{v.Expression, true})
		ms = append(ms, &condition{v.MessageExpression, false})
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	validations = c.CompileCondition(vs, opts, environment.StoredExpressions)
	messages = c.CompileCondition(ms, opts, environment.StoredExpressions)
	for _, e := range append(validations.CompilationErrors(), messages.CompilationErrors()...) {
		b.Fatal(e)
	}
	return validations, messages
}

func versioned(obj runtime.Object, ns *corev1.Namespace) *admission.VersionedAttributes {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	a := admission.NewAttributesRecord(obj, nil, gvk, ns.Name, "p", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "bench"})
	return &admission.VersionedAttributes{Attributes: a, VersionedObject: obj, VersionedKind: gvk}
}

func patchRequest(pod *corev1.Pod, ns *corev1.Namespace, params *corev1.ConfigMap) patch.Request {
	return patch.Request{
		MatchedResource:     schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		VersionedAttributes: versioned(pod, ns),
		ObjectInterfaces:    admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme),
		OptionalVariables:   plugincel.OptionalVariableBindings{VersionedParams: params},
		Namespace:           ns,
	}
}

type variable struct {
	v admissionregistrationv1.Variable
}

func (v *variable) GetExpression() string    { return v.v.Expression }
func (v *variable) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }
func (v *variable) GetName() string          { return v.v.Name }

type condition struct {
	expression string
	boolean    bool
}

func (c *condition) GetExpression() string { return c.expression }
func (c *condition) ReturnTypes() []*cel.Type {
	if c.boolean {
		return []*cel.Type{cel.BoolType}
	}
	return []*cel.Type{cel.StringType}
}
