// Package hypernode tests HyperNode discovery against a real kube-apiserver (envtest): the label and
// ibnetdiscover providers through the framework's writer, with every write counted at the transport.
package hypernode

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { os.Exit(framework.RunMain(m, &env)) }

// discovery is one running discovery controller and the writes it made.
type discovery struct {
	c      *hypernode.Controller
	writes *framework.WriteCounter
}

// startDiscovery runs a discovery controller with the given configuration until the test ends,
// then deletes every Node and discovered HyperNode the test left.
func startDiscovery(t *testing.T, yaml string) *discovery {
	t.Helper()
	file, err := config.Parse([]byte(yaml))
	require.NoError(t, err)
	d := &discovery{writes: framework.NewWriteCounter()}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(d.writes.RoundTrip)
	d.c, err = hypernode.New(cfg, hypernode.Options{Config: file, Registry: providers.Builtin(), Log: logr.Discard(),
		WriteRetries: 2, WriteRetryDelay: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		cleanup(t)
	})
	return d
}

// round runs one discovery round of the only provider now and returns its error. The provider
// also runs rounds by itself (at start, on Node and HyperNode changes); Round waits for a running
// one, so when it returns every earlier round has finished.
func (d *discovery) round(t *testing.T) error {
	t.Helper()
	ps := d.c.Providers()
	require.Len(t, ps, 1)
	r, ok := ps[0].(interface{ Round() error })
	require.True(t, ok)
	// The controller starts its providers once its informers have synced; a provider's own watch
	// (the ibnetdiscover ConfigMap) syncs after that.
	var err error
	framework.Eventually(t, 30*time.Second, "the provider to start", func(context.Context) (bool, error) {
		err = r.Round()
		return err == nil || (!strings.Contains(err.Error(), "has not synced") && !strings.Contains(err.Error(), "has not started")), nil
	})
	return err
}

// settle waits until the cluster's tree is want (the provider's own rounds get there), runs one more
// round that must write nothing, and returns the writes made since mark, in order.
func (d *discovery) settle(t *testing.T, mark int, want string) []string {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the tree to become\n"+want, func(context.Context) (bool, error) {
		return tree(t) == want, nil
	})
	n := d.writes.Len()
	require.NoError(t, d.round(t))
	require.Empty(t, d.writes.Since(n), "a round after the tree settled must write nothing")
	return d.writes.Since(mark)
}

func cleanup(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	require.NoError(t, env.Client.DeleteAllOf(ctx, &corev1.Node{}))
	require.NoError(t, env.Client.DeleteAllOf(ctx, &topologyv1alpha1.HyperNode{}))
}

// node creates a Node with labels.
func node(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	require.NoError(t, env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}))
}

// tree renders the cluster's HyperNodes, "<name>(<tier>/<tierName>,<source>): members", one per
// line, sorted.
func tree(t *testing.T) string {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	var l topologyv1alpha1.HyperNodeList
	require.NoError(t, env.Client.List(ctx, &l))
	var lines []string
	for _, hn := range l.Items {
		var members []string
		for _, m := range hn.Spec.Members {
			if m.Selector.ExactMatch != nil {
				members = append(members, m.Selector.ExactMatch.Name)
			}
		}
		sort.Strings(members)
		lines = append(lines, fmt.Sprintf("%s(%d/%s,%s): %s", hn.Name, hn.Spec.Tier, hn.Spec.TierName,
			hn.Labels[hypernode.SourceLabel], strings.Join(members, " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func getHyperNode(t *testing.T, name string) *topologyv1alpha1.HyperNode {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	var hn topologyv1alpha1.HyperNode
	err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &hn)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &hn
}
