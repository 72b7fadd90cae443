package app

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/explain"
	"github.com/hyperbatch/hyperbatch/internal/cli/policies"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/cli/topology"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
)

func newPoliciesCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "policies",
		Short: "List WorkloadPolicies, the namespaces each governs, conflicts and policies not Ready",
		Long: `List every WorkloadPolicy with the namespaces it governs (it is the policy the defaulting engine
picks there) and those where another policy outranks it; namespaces matched by two policies of equal
weight (the engine picks the lexically smallest name, rarely what was meant); and every policy
condition that is not True, with its reason.

Exits 4 when there is a conflict or a policy that is not Ready.`,
		Example: `  kubectl hyperbatch policies
  kubectl hyperbatch policies -o yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, _, err := o.load(cmd.Context(), "", snapshot.Policies, snapshot.Namespaces)
			if err != nil {
				return err
			}
			r := policies.Build(s)
			return o.print(r, attentionf(r.NeedsAttention(), "%d conflicts, %d conditions that need attention", len(r.Conflicts), len(r.NotReady)))
		},
	}
}

func newExplainCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain KIND/NAME",
		Short: "Explain what hyperbatch did to a workload: governing policy, filled fields and their source, skips, refusals, a HyperJob's split",
		Long: `Explain one object of a kind hyperbatch admits (Pod, Volcano Job, PodGroup, JobSet, HyperJob,
TrainJob, PropagationPolicy): which WorkloadPolicy governs its namespace and why (selector, weight, the ties
and weights it won or lost), each field hyperbatch filled with its source (the
hyperbatch.dev/defaulted-by annotation), the defaults the engine skips on it and why (a default
that would contradict the workload's own fields), what the engine would fill if it were created
now, the Warning Events about it, and for a HyperJob its children: demand, queue and clusters.`,
		Example: `  kubectl hyperbatch explain pod/demo
  kubectl hyperbatch explain vcjob/train -n ml
  kubectl hyperbatch explain hyperjob/big -n ml -o json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok || kind == "" || name == "" {
				return exitcode.Usagef("argument %q: write KIND/NAME, such as vcjob/train", args[0])
			}
			spec, err := explain.LookupKind(kind)
			if err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			if ns == "" {
				return exitcode.Usagef("explain needs one namespace: give -n NAMESPACE instead of -A")
			}
			s, c, err := o.load(cmd.Context(), ns, snapshot.Policies, snapshot.Namespaces, snapshot.Events, snapshot.VolcanoJobs, snapshot.PropagationPolicies)
			if err != nil {
				return err
			}
			obj := spec.New()
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					return exitcode.NotFoundf("%s %s/%s not found", spec.Kind, ns, name)
				}
				return fmt.Errorf("reading %s %s/%s: %w", spec.Kind, ns, name, err)
			}
			return o.print(explain.Build(spec, obj, s), nil)
		},
	}
}

func newTopologyCommand(o *Options) *cobra.Command {
	var svg, gang string
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Show the HyperNode tree with free accelerators and CPU, the gangs placed in each domain and the discovery source",
		Long: `Show the HyperNode tree as the scheduler resolves it: per HyperNode its tier, the discovery source
that owns it, its nodes, allocatable and free nvidia.com/gpu and CPU (allocatable less the requests
of the unfinished pods bound there), and the gangs whose pods it is the lowest HyperNode holding.

--svg FILE also writes the tree as a picture (one cell per GPU, pods coloured by gang).
--gang NAMESPACE/NAME marks where that gang sits or, when it waits, the domain the scheduler
reported as its best candidate.`,
		Example: `  kubectl hyperbatch topology
  kubectl hyperbatch topology --gang ml/train --svg topology.svg`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := topology.Options{}
			if gang != "" {
				key, err := o.gangKey(gang)
				if err != nil {
					return err
				}
				opts.Gang = key
			}
			s, _, err := o.load(cmd.Context(), "", snapshot.HyperNodes, snapshot.Nodes, snapshot.Pods, snapshot.PodGroups)
			if err != nil {
				return err
			}
			if opts.Gang != "" {
				ns, name, _ := strings.Cut(opts.Gang, "/")
				if s.PodGroup(ns, name) == nil {
					return exitcode.NotFoundf("PodGroup %s not found", opts.Gang)
				}
			}
			r := topology.Build(s, opts)
			if svg != "" {
				pic := r.Picture()
				if err := os.WriteFile(svg, []byte(pic.SVG()), 0o644); err != nil {
					return fmt.Errorf("writing --svg: %w", err)
				}
			}
			return o.print(r, nil)
		},
	}
	cmd.Flags().StringVar(&svg, "svg", "", "Also write the tree as an SVG picture to this file.")
	cmd.Flags().StringVar(&gang, "gang", "", "Mark where this gang (PodGroup NAMESPACE/NAME, or NAME in -n's namespace) sits or would fit.")
	return cmd
}

// usageArgs makes an argument-count error a usage error (exit 2, docs/cli.md), with the command's
// usage line to say what it takes.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return exitcode.Usagef("%v; usage: %s", err, cmd.UseLine())
		}
		return nil
	}
}

// gangKey is "namespace/name" of a gang argument: NAMESPACE/NAME, or NAME in -n's namespace.
func (o *Options) gangKey(arg string) (string, error) {
	if ns, name, ok := strings.Cut(arg, "/"); ok {
		if ns == "" || name == "" {
			return "", exitcode.Usagef("gang %q: write NAMESPACE/NAME or NAME with -n", arg)
		}
		return arg, nil
	}
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns + "/" + arg, nil
}

func newWhyCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "why GANG",
		Short: "Say why a gang waits, in numbers: the Queue against its reservations, each tier's best domain against the need, and what would make it fit",
		Long: `Say why a gang (a PodGroup, or a workload that owns one) has not started, in the numbers
hyperbatch's deciders recorded:

  - the Queue: its state, its capability and what the Queue's Inqueue and Running gangs reserve,
    the gangs holding those reservations (with their deadlines when one is known) and the Pending
    gangs ahead; the PodGroup status controller's decision (the Unschedulable condition);
  - the placement, from hyperbatch-scheduler's hyperbatch.dev/placement annotation: per tier the
    candidates, the best domain's room and free capacity against the gang's need, and what binds
    (a resource, pod slots, node constraints, the tier limit);
  - preemption: hyperbatch-scheduler's last Event about preempting for it (the domain it clears
    and the victims it evicts, chosen in the gang's sub-group shape, or why it does not preempt);
  - the smallest changes that would let it go on: fewer pods, a higher tier, fewer sub-groups,
    or waiting for a gang with a known deadline or for the victims being preempted.

GANG is NAME or pg/NAME (a PodGroup), vcjob/NAME, jobset/NAME, trainjob/NAME or pod/NAME, in -n's namespace.
Exits 4 while the gang is not placed.`,
		Example: `  kubectl hyperbatch why vcjob/train -n ml
  kubectl hyperbatch why pg/train-6d1c -n ml -o json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			if ns == "" {
				return exitcode.Usagef("why needs one namespace: give -n NAMESPACE instead of -A")
			}
			s, _, err := o.load(cmd.Context(), "", snapshot.PodGroups, snapshot.Queues, snapshot.PriorityClasses, snapshot.Pods,
				snapshot.Nodes, snapshot.HyperNodes, snapshot.VolcanoJobs, snapshot.Events)
			if err != nil {
				return err
			}
			pg, owner, err := why.Resolve(s, ns, args[0])
			if err != nil {
				return err
			}
			r := why.Build(s, pg, owner, time.Now())
			return o.print(r, attentionf(r.Waits(), "gang %s is not placed", r.Gang))
		},
	}
}
