// Package hypertopology is the HyperTopology kube-scheduler plugin: all-or-nothing (gang) scheduling
// of Volcano PodGroups, placed in the lowest-tier HyperNode that holds the whole gang.
//
// Extension points:
//   - QueueSort: priority, then the gang's time (PodGroup creation time, fixed once per gang), then
//     gang/pod name, so a gang's pods are popped together. It must be the profile's only QueueSort
//     plugin.
//   - PreEnqueue: keeps a gang pod out of the active queue while fewer than minMember pods of its
//     gang exist (pods whose PodGroup does not exist yet pass); the member completing the quorum, or
//     a PodGroup change, activates the gated siblings (see preenqueue.go).
//   - PreFilter: resolves the gang (PodGroup from the pod's scheduling.k8s.io/group-name annotation;
//     pods without one are skipped), waits until minMember pods exist, chooses the gang's domain once
//     (cached per PodGroup UID, the PodGroup fields placement depends on, and tree generation) and pins the pod to it through
//     PreFilterResult.NodeNames. Filter enforces the same set (nominated-node and preemption paths).
//   - PreScore/Score/NormalizeScore: within the domain, prefer nodes close to the gang's other pods
//     and leaves with room for more of it.
//   - Reserve/Unreserve: track reserved gang pods; Unreserve releases the whole gang.
//   - Permit: wait until minMember pods hold a node, then allow them all; on timeout every waiting
//     member is rejected.
//   - PostFilter: when a gang pod cannot be placed, release the reservations of younger incomplete
//     gangs if that lets this (older) gang fit, otherwise release this gang's own reservations, so two
//     gangs half-filling one domain never deadlock.
//   - EnqueueExtensions: requeue on HyperNode, Node, PodGroup and assigned-pod-delete events.
package hypertopology

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	vcclientset "volcano.sh/apis/pkg/client/clientset/versioned"
	vcinformers "volcano.sh/apis/pkg/client/informers/externalversions"
	schedlisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/args"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = args.PluginName

// gangIndex indexes pods by "namespace/podgroup".
const gangIndex = "hyperbatch.dev/gang"

// Plugin is the HyperTopology scheduler plugin. Its reservation bookkeeping and the order in which
// its locks may be taken are in reservations.go.
type Plugin struct {
	handle        fwk.Handle
	args          *args.HyperTopologyArgs
	permitTimeout time.Duration
	// waitForEnqueue: a PodGroup without a phase holds its gang (args.WaitForEnqueue).
	waitForEnqueue bool

	tree     *topology.Cache
	res      *reservations
	pgLister schedlisters.PodGroupLister
	// queues (Volcano Queues, for the reclaimable rule) and pdbs feed gang preemption.
	queues schedlisters.QueueLister
	pdbs   policylisters.PodDisruptionBudgetLister
	pods   cache.Indexer
	// nodes is the scheduler's Node lister: the taints of nodes holding reservations at Permit
	// (nil: not checked).
	nodes  corelisters.NodeLister
	events *recorder
	// placements writes why a gang waits, in numbers, on its PodGroup (placement.go); nil writes nothing.
	placements *placementWriter

	mu    sync.Mutex
	plans map[gang.Key]*plan
	// queueTimes (under mu) is each gang's QueueSort time, fixed once; see gangQueueTime.
	queueTimes map[gang.Key]time.Time
}

var (
	_ fwk.QueueSortPlugin   = &Plugin{}
	_ fwk.PreEnqueuePlugin  = &Plugin{}
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.PreScorePlugin    = &Plugin{}
	_ fwk.ScorePlugin       = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PermitPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
)

// plan is a gang's chosen domain.
type plan struct {
	pgUID types.UID
	// pgKey is gang.PlacementKey of the PodGroup the plan was made for (not its generation: status
	// writes bump that).
	pgKey    uint64
	treeGen  int64
	hyper    string
	tier     int
	root     bool
	nodes    sets.Set[string] // nil for the whole cluster (root, not spilled)
	spilled  bool             // nodes are the leaves the gang was packed into, a subset of hyper's
	rooms    []int32          // per HyperNode index, for treeGen
	need     int
	describe string
	// groups is where each sub-group goes (pods per node), for a gang with sub-groups; nil otherwise.
	groups []domain.GroupPlacement
}

// New is the plugin factory registered with kube-scheduler.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	a, err := args.FromObject(obj)
	if err != nil {
		return nil, err
	}
	if h.KubeConfig() == nil {
		return nil, fmt.Errorf("%s needs the scheduler's kubeconfig to watch HyperNodes and PodGroups", Name)
	}
	// Custom resources are served as JSON only; the scheduler's own config may ask for protobuf.
	cfg := rest.CopyConfig(h.KubeConfig())
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	vc, err := vcclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Volcano client: %w", err)
	}
	p, err := newWithInformers(ctx, a, h, vcinformers.NewSharedInformerFactory(vc, 0))
	if err != nil {
		return nil, err
	}
	p.placements = newPlacementWriter(ctx, vc)
	return p, nil
}

func newWithInformers(ctx context.Context, a *args.HyperTopologyArgs, h fwk.Handle, vf vcinformers.SharedInformerFactory) (*Plugin, error) {
	logger := klog.FromContext(ctx)
	registerMetrics()
	p := &Plugin{
		handle:         h,
		args:           a,
		permitTimeout:  time.Duration(*a.PermitTimeoutSeconds) * time.Second,
		waitForEnqueue: *a.WaitForEnqueue,
		tree:           topology.NewCache(),
		res:            newReservations(),
		plans:          map[gang.Key]*plan{},
		events:         newRecorder(h.EventRecorder()),
	}

	hnInformer := vf.Topology().V1alpha1().HyperNodes().Informer()
	pgInformer := vf.Scheduling().V1beta1().PodGroups()
	p.pgLister = pgInformer.Lister()
	p.queues = vf.Scheduling().V1beta1().Queues().Lister()
	p.pdbs = h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	nodeInformer := h.SharedInformerFactory().Core().V1().Nodes().Informer()
	p.nodes = h.SharedInformerFactory().Core().V1().Nodes().Lister()
	if err := p.tree.AddEventHandlers(hnInformer, nodeInformer); err != nil {
		return nil, err
	}
	if _, err := pgInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { p.onPodGroup(obj) },
		UpdateFunc: p.onPodGroupUpdate,
		DeleteFunc: func(obj interface{}) { p.onPodGroupDelete(obj) },
	}); err != nil {
		return nil, err
	}

	podInformer := h.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := podInformer.AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		// Only possible when the informer already runs (never under kube-scheduler); fall back to scans.
		logger.Info("Pod informer already started; gang lookups will scan all pods", "plugin", Name, "err", err)
	}
	p.pods = podInformer.GetIndexer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { p.onPod(obj, true) },
		UpdateFunc: func(_, obj interface{}) { p.onPod(obj, false) },
		DeleteFunc: func(obj interface{}) { p.onPodDelete(obj) },
	}); err != nil {
		return nil, err
	}

	vf.Start(ctx.Done())
	// Wait (bounded) for PodGroups and HyperNodes so the first gangs are not turned away for lack of
	// a cache; nodes come from the scheduler's own informer, which it starts later.
	syncCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for typ, ok := range vf.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			logger.Error(nil, "Informer did not sync; are the Volcano CRDs installed and readable?", "plugin", Name, "type", typ)
		}
	}
	go p.watchTree(ctx)
	logger.Info("HyperTopology plugin ready", "permitTimeout", p.permitTimeout, "maxCandidatesPerTier", *a.MaxCandidatesPerTier, "waitForEnqueue", p.waitForEnqueue,
		"localityWeight", *a.ScoreWeights.Locality, "leafFillWeight", *a.ScoreWeights.LeafFill)
	return p, nil
}

// Name implements fwk.Plugin.
func (p *Plugin) Name() string { return Name }

// Tree exposes the HyperNode tree (for tests and diagnostics).
func (p *Plugin) Tree() *topology.Cache { return p.tree }

func indexByGang(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if k, ok := gang.KeyOf(pod); ok {
		return []string{k.String()}, nil
	}
	return nil, nil
}

// members lists the gang's non-terminal pods (any scheduler) that are not being deleted.
func (p *Plugin) members(key gang.Key) []*corev1.Pod {
	objs, err := p.pods.ByIndex(gangIndex, key.String())
	if err != nil {
		objs = p.pods.List()
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if k, ok := gang.KeyOf(pod); ok && k == key {
			out = append(out, pod)
		}
	}
	return out
}

// onPod drops reservations once the pod is bound (the informer then counts it) and, for a new pod,
// wakes the gang up when its missing members have arrived: unscheduled pod additions are not
// requeueing events in kube-scheduler, so siblings turned away for "gang incomplete" are activated
// here. (Updates do not activate: the scheduler's own status updates would make that a loop.)
func (p *Plugin) onPod(obj interface{}, added bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, ok := gang.KeyOf(pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName != "" {
		p.res.Forget(key, pod.UID)
		return
	}
	if !added {
		return
	}
	pg, err := p.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return
	}
	members := p.members(key)
	if int32(len(members)) >= max(pg.Spec.MinMember, 1) {
		p.activate(members)
	}
}

func (p *Plugin) onPodDelete(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		if key, ok := gang.KeyOf(pod); ok {
			p.res.Forget(key, pod.UID)
			p.forgetQueueTimeIfEmpty(key)
		}
	}
}

// forgetQueueTimeIfEmpty drops the gang's QueueSort time once no pod of the gang exists, so gangs
// whose PodGroup never appears do not keep an entry forever. No pod of the gang is in the
// scheduler's queue then, so no queued pod changes order; a later pod fixes a new time.
func (p *Plugin) forgetQueueTimeIfEmpty(key gang.Key) {
	objs, err := p.pods.ByIndex(gangIndex, key.String())
	if err != nil || len(objs) > 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.queueTimes, key)
}

// activate moves the pending pods among members back to the active queue. (Only called from
// handlers on the scheduler's pod informer or with pods from it, which kube-scheduler starts after it
// has set the framework's pod activator.)
func (p *Plugin) activate(members []*corev1.Pod) {
	m := map[string]*corev1.Pod{}
	for _, pod := range members {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			m[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	if len(m) > 0 {
		p.handle.Activate(klog.Background(), m)
	}
}

func (p *Plugin) dropPlan(key gang.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.plans, key)
}

func (p *Plugin) getPlan(key gang.Key) *plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plans[key]
}

func (p *Plugin) setPlan(key gang.Key, pl *plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans[key] = pl
}
