package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Kind names one kind of object the webhooks admit: a row of the defaults engine's kind table
// (defaults.Kinds), which holds its GVK, paths, engine function and UPDATE rule.
type Kind = defaults.Kind

// The kinds hyperbatch admits.
const (
	KindPod               = defaults.KindPod
	KindVolcanoJob        = defaults.KindVolcanoJob
	KindPodGroup          = defaults.KindPodGroup
	KindJobSet            = defaults.KindJobSet
	KindHyperJob          = defaults.KindHyperJob
	KindTrainJob          = defaults.KindTrainJob
	KindPropagationPolicy = defaults.KindPropagationPolicy
	KindWorkloadPolicy    = defaults.KindWorkloadPolicy
)

// AllKinds are every kind, in the order the webhook configurations list them.
func AllKinds() []Kind { return defaults.KindNames() }

// Stable paths of the webhook server's handlers (the kind table's). The webhook configurations
// refer to them, so they never change.
const (
	MutatePodPath               = defaults.MutatePodPath
	MutateVolcanoJobPath        = defaults.MutateVolcanoJobPath
	MutatePodGroupPath          = defaults.MutatePodGroupPath
	MutateJobSetPath            = defaults.MutateJobSetPath
	MutateHyperJobPath          = defaults.MutateHyperJobPath
	MutateTrainJobPath          = defaults.MutateTrainJobPath
	MutatePropagationPolicyPath = defaults.MutatePropagationPolicyPath

	ValidatePodPath        = defaults.ValidatePodPath
	ValidateVolcanoJobPath = defaults.ValidateVolcanoJobPath
	ValidatePodGroupPath   = defaults.ValidatePodGroupPath
	ValidateJobSetPath     = defaults.ValidateJobSetPath
	ValidateHyperJobPath   = defaults.ValidateHyperJobPath
	ValidateTrainJobPath   = defaults.ValidateTrainJobPath
	// ValidatePropagationPolicyPath serves the allowedClusters check of PropagationPolicies.
	ValidatePropagationPolicyPath = defaults.ValidatePropagationPolicyPath

	ValidateWorkloadPolicyPath = defaults.ValidateWorkloadPolicyPath
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
// PriorityClasses, for Volcano Jobs Queues, for PodGroups Volcano Jobs (a Job's PodGroup follows
// its Job), and for JobSets
// (whose pods the PodGroup gate admits) JobSets and PodGroups. Every read on the request path is served by mgr's cache; the compiled
// WorkloadPolicies are rebuilt only after a WorkloadPolicy event. Call it once per manager, before
// mgr.Start. The manager's scheme must know the admitted kinds (internal/scheme.New does).
//
// RBAC: get, list and watch on namespaces, priorityclasses.scheduling.k8s.io,
// workloadpolicies.hyperbatch.dev, jobsets.jobset.x-k8s.io, podgroups.scheduling.volcano.sh,
// queues.scheduling.volcano.sh and jobs.batch.volcano.sh; list and watch on
// validatingwebhookconfigurations.admissionregistration.k8s.io.
func Setup(mgr manager.Manager, opts Options) error {
	opts = opts.withDefaults()
	for _, k := range opts.Kinds {
		if _, ok := kindHandlers[k]; !ok {
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
	if hasKind(opts.Kinds, KindVolcanoJob) {
		// volcanoQueueRefusal reads Volcano's Queues.
		qInf, err := c.GetInformer(ctx, &schedulingv1beta1.Queue{})
		if err != nil {
			return fmt.Errorf("webhook: Queue informer: %w", err)
		}
		if d.queues, err = storeOf(qInf, "Queue"); err != nil {
			return err
		}
		// Whether Volcano's job webhook is registered, for the same.
		vwcInf, err := c.GetInformer(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		if err != nil {
			return fmt.Errorf("webhook: ValidatingWebhookConfiguration informer: %w", err)
		}
		vwcs, err := storeOf(vwcInf, "ValidatingWebhookConfiguration")
		if err != nil {
			return err
		}
		recheck := func() { d.volcanoJobWebhook.Store(hasVolcanoJobWebhook(vwcs.(toolscache.Store))) }
		if _, err := vwcInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { recheck() },
			UpdateFunc: func(any, any) { recheck() },
			DeleteFunc: func(any) { recheck() },
		}); err != nil {
			return fmt.Errorf("webhook: ValidatingWebhookConfiguration event handler: %w", err)
		}
	}
	if hasKind(opts.Kinds, KindPodGroup) {
		// A Volcano Job's PodGroup follows its Job.
		if _, err := c.GetInformer(ctx, &batchv1alpha1.Job{}); err != nil {
			return fmt.Errorf("webhook: Volcano Job informer: %w", err)
		}
	}
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

// specOf is kind k's row of the kind table. kindJobSetPod, which comes with KindJobSet, has the
// Pod's GVK and its own validating path.
func specOf(k Kind) defaults.KindSpec {
	if k == kindJobSetPod {
		pod, _ := defaults.LookupKind(KindPod)
		return defaults.KindSpec{Kind: kindJobSetPod, GVK: pod.GVK, Resource: pod.Resource, ValidatePath: ValidateJobSetPodPath, New: pod.New}
	}
	spec, _ := defaults.LookupKind(k)
	return spec
}

func hasKind(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// kindHandlers builds the mutating and validating handler of each kind of the table (nil where the
// kind has none); the kind's row says on which paths they are served.
var kindHandlers = map[Kind]func(d *deps) (mutate, validate admission.Handler){
	KindPod: func(d *deps) (admission.Handler, admission.Handler) { return d.podMutator(), d.podValidator() },
	KindVolcanoJob: func(d *deps) (admission.Handler, admission.Handler) {
		return d.volcanoJobMutator(), d.volcanoJobValidator()
	},
	KindPodGroup: func(d *deps) (admission.Handler, admission.Handler) {
		return d.podGroupMutator(), d.podGroupValidator()
	},
	KindJobSet: func(d *deps) (admission.Handler, admission.Handler) {
		return d.jobSetMutator(), d.jobSetValidator()
	},
	KindHyperJob: func(d *deps) (admission.Handler, admission.Handler) {
		return d.hyperJobMutator(), d.hyperJobValidator()
	},
	KindTrainJob: func(d *deps) (admission.Handler, admission.Handler) {
		return d.trainJobMutator(), d.trainJobValidator()
	},
	KindPropagationPolicy: func(d *deps) (admission.Handler, admission.Handler) {
		return d.propagationPolicyMutator(), d.propagationPolicyValidator()
	},
	KindWorkloadPolicy: func(d *deps) (admission.Handler, admission.Handler) { return noMutator(), d.workloadPolicyValidator() },
}

// noMutator is the mutating handler of a kind without defaults: none.
func noMutator() admission.Handler { return nil }

// handlers returns every handler of kinds by path.
func (d *deps) handlers(kinds []Kind) map[string]admission.Handler {
	out := map[string]admission.Handler{}
	for _, k := range kinds {
		spec := specOf(k)
		build, ok := kindHandlers[k]
		if !ok {
			continue
		}
		m, v := build(d)
		if spec.MutatePath != "" && m != nil {
			out[spec.MutatePath] = m
		}
		if spec.ValidatePath != "" && v != nil {
			out[spec.ValidatePath] = v
		}
		if k == KindJobSet {
			out[ValidateJobSetPodPath] = d.jobSetPodGate()
		}
	}
	return out
}

// reader is the cached reader the handlers use; an alias so tests can pass a fake client.
type reader = client.Reader
