// Package app is kubectl-hyperbatch's command tree: kubectl's connection flags (k8s.io/cli-runtime's
// ConfigFlags: --kubeconfig, --context, -n ...), -A, -o, and one subcommand per question. Each
// subcommand reads a snapshot of the cluster and hands it to its package (policies, explain,
// topology, why), which computes the report; this package only wires and prints.
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// Options are what every subcommand shares.
type Options struct {
	ConfigFlags   *genericclioptions.ConfigFlags
	AllNamespaces bool
	Output        output.Format
	genericiooptions.IOStreams

	// newClient builds the client from ConfigFlags; tests may replace it.
	newClient func() (client.Client, error)
}

// Main runs the plugin with os.Args and returns the exit code (exitcode).
func Main() int {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := NewCommand(streams)
	cmd.SetArgs(os.Args[1:])
	err := cmd.Execute()
	switch {
	case exitcode.Of(err) == exitcode.Attention:
		_, _ = fmt.Fprintln(streams.ErrOut, "kubectl-hyperbatch:", err)
	case err != nil:
		_, _ = fmt.Fprintln(streams.ErrOut, "error:", err)
	}
	return exitcode.Of(err)
}

// NewCommand builds the command tree writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{ConfigFlags: genericclioptions.NewConfigFlags(true).WithDiscoveryQPS(50), IOStreams: streams}
	o.newClient = o.client
	cmd := &cobra.Command{
		Use:   "kubectl-hyperbatch",
		Short: "Explain what hyperbatch did to a workload, why a gang waits, and where it would fit",
		Long: `kubectl hyperbatch answers questions about hyperbatch from what the cluster stores: the
WorkloadPolicies and which namespaces they govern, the defaults each workload got and from where, the
HyperNode tree with its free capacity, and the scheduler's own numbers for a gang that waits.

It reads; it never writes. It needs list access to the objects a command explains.

Exit codes: 0 nothing needs attention; 1 the command could not run; 2 bad arguments;
3 the object asked about does not exist; 4 the command found something to act on (a policy
conflict or a policy not Ready; a gang that is not placed).`,
		Example: `  kubectl hyperbatch policies
  kubectl hyperbatch explain vcjob/train -n ml
  kubectl hyperbatch topology --gang ml/train --svg topology.svg
  kubectl hyperbatch why ml/train -o json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// An unknown command is a usage error (exit 2) like a wrong argument count; alone, the
		// command prints its help.
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.Usagef("%v", err) })
	flags := cmd.PersistentFlags()
	o.ConfigFlags.AddFlags(flags)
	flags.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Read every namespace (the commands that list workloads).")
	output.AddFlag(flags, &o.Output)
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error { return o.Output.Validate() }
	cmd.AddCommand(newPoliciesCommand(o), newExplainCommand(o), newTopologyCommand(o), newWhyCommand(o))
	return cmd
}

func (o *Options) client() (client.Client, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return c, nil
}

// namespace is -n (or the kubeconfig context's namespace); "" with -A.
func (o *Options) namespace() (string, error) {
	if o.AllNamespaces {
		return "", nil
	}
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// load reads a snapshot of parts.
func (o *Options) load(ctx context.Context, namespace string, parts ...snapshot.Part) (*snapshot.Snapshot, client.Client, error) {
	c, err := o.newClient()
	if err != nil {
		return nil, nil, err
	}
	s, err := snapshot.Load(ctx, c, namespace, parts...)
	if err != nil {
		return nil, nil, err
	}
	return s, c, nil
}

// print writes r, then ends with Attention when attention is set.
func (o *Options) print(r output.Report, attention error) error {
	if err := output.Print(o.Out, o.Output, r); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return attention
}

// attentionf returns an Attention error when cond holds.
func attentionf(cond bool, format string, args ...any) error {
	if !cond {
		return nil
	}
	return exitcode.Attentionf(format, args...)
}
