package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Kind names one kind of object the webhooks admit.
type Kind string

// The kinds hyperbatch admits.
const (
	KindPod               Kind = "Pod"
	KindVolcanoJob        Kind = "VolcanoJob"
	KindPodGroup          Kind = "PodGroup"
	KindJobSet            Kind = "JobSet"
	KindHyperJob          Kind = "HyperJob"
	KindPropagationPolicy Kind = "PropagationPolicy"
	KindWorkloadPolicy    Kind = "WorkloadPolicy"
)

// AllKinds are every kind, in the order the webhook configurations list them.
func AllKinds() []Kind {
	return []Kind{KindPod, KindVolcanoJob, KindPodGroup, KindJobSet, KindHyperJob, KindPropagationPolicy, KindWorkloadPolicy}
}

// Stable paths of the webhook server's handlers. The webhook configurations refer to them, so they
// never change.
const (
	MutatePodPath               = "/mutate-pod"
	MutateVolcanoJobPath        = "/mutate-volcano-job"
	MutatePodGroupPath          = "/mutate-podgroup"
	MutateJobSetPath            = "/mutate-jobset"
	MutateHyperJobPath          = "/mutate-hyperjob"
	MutatePropagationPolicyPath = "/mutate-propagationpolicy"

	ValidatePodPath        = "/validate-pod"
	ValidateVolcanoJobPath = "/validate-volcano-job"
	ValidatePodGroupPath   = "/validate-podgroup"
	ValidateJobSetPath     = "/validate-jobset"
	ValidateHyperJobPath   = "/validate-hyperjob"
	// ValidatePropagationPolicyPath serves the allowedClusters check of PropagationPolicies.
	ValidatePropagationPolicyPath = "/validate-propagationpolicy"

	ValidateWorkloadPolicyPath = "/validate-workloadpolicy"
)

// Options tune Setup. The zero value serves every kind.
type Options struct {
	// Kinds are the kinds to serve; nil or empty serves AllKinds. Pass the same list to
	// ConfigOptions.Kinds so the apiserver only calls paths that are served.
	Kinds []Kind

	// NoPodGroupGate makes the PodGroup gate (which comes with KindJobSet) admit every pod: set it when
	// controllers/podgroup does not run, since nothing would then create the PodGroups it waits for.
	NoPodGroupGate bool

	// NamespaceWait bounds how long a request waits for a namespace that is not yet in the
	// manager's cache (a namespace created a moment before the workload). Default 2s; the request's
	// own deadline (the webhook timeout) still applies.
	NamespaceWait time.Duration

	// ExcludedNamespaces are namespaces whose objects the handlers admit unchanged and unchecked,
	// whatever the webhook configurations send: kube-system, hyperbatch's own namespace and any
	// others the operator excludes (the manager's --excluded-namespaces). Keep it equal to the
	// configurations' exclusions (ConfigOptions.Namespace and ExcludedNamespaces).
	ExcludedNamespaces []string
}

// DefaultNamespaceWait is Options.NamespaceWait's default.
const DefaultNamespaceWait = 2 * time.Second

func (o Options) withDefaults() Options {
	if len(o.Kinds) == 0 {
		o.Kinds = AllKinds()
	}
	if o.NamespaceWait <= 0 {
		o.NamespaceWait = DefaultNamespaceWait
	}
	return o
}

// Setup registers the mutating and validating handlers of opts.Kinds on mgr's webhook server
// (paths above) and the informers they read: Namespaces, WorkloadPolicies, for Pods
// PriorityClasses, and for JobSets (whose pods the PodGroup gate admits) JobSets and PodGroups. Every read on the request path is served by mgr's cache; the compiled
// WorkloadPolicies are rebuilt only after a WorkloadPolicy event. Call it once per manager, before
// mgr.Start. The manager's scheme must know the admitted kinds (internal/scheme.New does).
//
// RBAC: get, list and watch on namespaces, priorityclasses.scheduling.k8s.io,
// workloadpolicies.hyperbatch.dev, jobsets.jobset.x-k8s.io and podgroups.scheduling.volcano.sh.
func Setup(mgr manager.Manager, opts Options) error {
	opts = opts.withDefaults()
	for _, k := range opts.Kinds {
		if _, ok := kindSpecs[k]; !ok {
			return fmt.Errorf("webhook: unknown kind %q (known: %v)", k, AllKinds())
		}
	}
	ctx := context.Background()
	c := mgr.GetCache()
	// Create the informers now so they start and sync with the cache, not on the first request.
	polInf, err := c.GetInformer(ctx, &hbv1.WorkloadPolicy{})
	if err != nil {
		return fmt.Errorf("webhook: WorkloadPolicy informer: %w", err)
	}
	nsInf, err := c.GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("webhook: Namespace informer: %w", err)
	}
	d := newDeps(c, opts)
	d.live = mgr.GetAPIReader()
	d.noPodGroupGate = opts.NoPodGroupGate
	if hasKind(opts.Kinds, KindJobSet) {
		// The PodGroup gate reads JobSets and PodGroups.
		for _, obj := range []client.Object{&jobsetv1alpha2.JobSet{}, &schedulingv1beta1.PodGroup{}} {
			if _, err := c.GetInformer(ctx, obj); err != nil {
				return fmt.Errorf("webhook: %T informer: %w", obj, err)
			}
		}
	}
	if d.namespaces, err = storeOf(nsInf, "Namespace"); err != nil {
		return err
	}
	if hasKind(opts.Kinds, KindPod) {
		pcInf, err := c.GetInformer(ctx, &schedulingv1.PriorityClass{})
		if err != nil {
			return fmt.Errorf("webhook: PriorityClass informer: %w", err)
		}
		if d.priorityClasses, err = storeOf(pcInf, "PriorityClass"); err != nil {
			return err
		}
	}
	if _, err := polInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.policies.invalidate() },
		UpdateFunc: func(any, any) { d.policies.invalidate() },
		DeleteFunc: func(any) { d.policies.invalidate() },
	}); err != nil {
		return fmt.Errorf("webhook: WorkloadPolicy event handler: %w", err)
	}
	srv := mgr.GetWebhookServer()
	for path, h := range d.handlers(opts.Kinds) {
		srv.Register(path, NewAdmissionWebhook(h))
	}
	return nil
}

// ReadyCheck is a healthz.Checker for /readyz: it passes once the webhook server is serving and
// the informers the handlers read have synced, so a replica takes admission traffic only when it
// can answer from its cache without waiting.
func ReadyCheck(mgr manager.Manager) healthz.Checker {
	started := mgr.GetWebhookServer().StartedChecker()
	return func(req *http.Request) error {
		if err := started(req); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("webhook: informers not synced yet")
		}
		return nil
	}
}

// kindSpec is what the handlers and the webhook configurations know about one kind.
type kindSpec struct {
	gvk          schema.GroupVersionKind
	resource     string
	mutatePath   string // "" when the kind has no mutating webhook
	validatePath string // "" when the kind has no validating webhook
	cluster      bool   // cluster-scoped
}

var kindSpecs = map[Kind]kindSpec{
	KindPod: {gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, resource: "pods",
		mutatePath: MutatePodPath, validatePath: ValidatePodPath},
	KindVolcanoJob: {gvk: schema.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"}, resource: "jobs",
		mutatePath: MutateVolcanoJobPath, validatePath: ValidateVolcanoJobPath},
	KindPodGroup: {gvk: schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}, resource: "podgroups",
		mutatePath: MutatePodGroupPath, validatePath: ValidatePodGroupPath},
	KindJobSet: {gvk: schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}, resource: "jobsets",
		mutatePath: MutateJobSetPath, validatePath: ValidateJobSetPath},
	KindHyperJob: {gvk: schema.GroupVersionKind{Group: "training.volcano.sh", Version: "v1alpha1", Kind: "HyperJob"}, resource: "hyperjobs",
		mutatePath: MutateHyperJobPath, validatePath: ValidateHyperJobPath},
	KindPropagationPolicy: {gvk: schema.GroupVersionKind{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "PropagationPolicy"}, resource: "propagationpolicies",
		mutatePath: MutatePropagationPolicyPath, validatePath: ValidatePropagationPolicyPath},
	kindJobSetPod: {gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, resource: "pods", validatePath: ValidateJobSetPodPath},
	KindWorkloadPolicy: {gvk: hbv1.GroupVersion.WithKind("WorkloadPolicy"), resource: "workloadpolicies",
		validatePath: ValidateWorkloadPolicyPath, cluster: true},
}

func hasKind(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// handlers returns every handler of kinds by path.
func (d *deps) handlers(kinds []Kind) map[string]admission.Handler {
	out := map[string]admission.Handler{}
	for _, k := range kinds {
		spec := kindSpecs[k]
		var m, v admission.Handler
		switch k {
		case KindPod:
			m, v = d.podMutator(), d.podValidator()
		case KindVolcanoJob:
			m, v = d.volcanoJobMutator(), d.volcanoJobValidator()
		case KindPodGroup:
			m, v = d.podGroupMutator(), d.podGroupValidator()
		case KindJobSet:
			m, v = d.jobSetMutator(), d.jobSetValidator()
			out[ValidateJobSetPodPath] = d.jobSetPodGate()
		case KindHyperJob:
			m, v = d.hyperJobMutator(), d.hyperJobValidator()
		case KindPropagationPolicy:
			m, v = d.propagationPolicyMutator(), d.propagationPolicyValidator()
		case KindWorkloadPolicy:
			v = d.workloadPolicyValidator()
		}
		if spec.mutatePath != "" && m != nil {
			out[spec.mutatePath] = m
		}
		if spec.validatePath != "" && v != nil {
			out[spec.validatePath] = v
		}
	}
	return out
}

// reader is the cached reader the handlers use; an alias so tests can pass a fake client.
type reader = client.Reader
