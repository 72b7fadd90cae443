package localproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

// A state file of the one-cluster layout reads as the cluster "local" with that layout's start order.
func TestReadStateOfTheOlderLayout(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(StateFile(dir), []byte(`{"portBase":16443,"nodes":16}`), 0o644))
	st, ok := ReadState(dir)
	require.True(t, ok)
	require.Len(t, st.Clusters, 1)
	cl := st.Clusters[0]
	assert.Equal(t, "local", cl.Name)
	assert.Equal(t, dir, cl.Dir)
	assert.Equal(t, 16443, cl.Ports().APIServer)
	assert.Equal(t, "etcd", cl.Started[0])
	assert.Equal(t, "jobset-controller", cl.Started[len(cl.Started)-1])

	_, ok = ReadState(t.TempDir())
	assert.False(t, ok, "a directory without a state file")
}

// Every cluster's context goes into the one kubeconfig (the first current); a cluster in a
// subdirectory also gets a kubeconfig of its own.
func TestKubeconfigHoldsEveryCluster(t *testing.T) {
	dir := t.TempDir()
	clusters := []Cluster{
		{Name: "karmada", Dir: dir, PortBase: 30000, Role: RoleStandalone},
		{Name: "member1", Dir: filepath.Join(dir, "member1"), PortBase: 30100, Role: RoleStandalone},
	}
	for _, c := range clusters {
		require.NoError(t, c.PKI().Generate())
	}
	require.NoError(t, WriteKubeconfigs(dir, clusters))
	all, err := clientcmd.LoadFromFile(KubeconfigFile(dir))
	require.NoError(t, err)
	assert.Equal(t, "hyperbatch-karmada", all.CurrentContext)
	require.Contains(t, all.Contexts, "hyperbatch-member1")
	assert.Equal(t, "https://127.0.0.1:30100", all.Clusters[all.Contexts["hyperbatch-member1"].Cluster].Server)
	own, err := clientcmd.LoadFromFile(clusters[1].Kubeconfig())
	require.NoError(t, err)
	assert.Len(t, own.Contexts, 1)
	assert.Equal(t, "hyperbatch-member1", own.CurrentContext)
}

// A session records each cluster's start order; PID files carry the cluster's name; the recorded
// processes are stopped in the reverse order.
func TestSessionRecordsStartOrderAndDownReversesIt(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	dir := t.TempDir()
	st := State{Clusters: []Cluster{
		{Name: "a", Dir: dir, PortBase: 30000, Role: RoleStandalone},
		{Name: "b", Dir: filepath.Join(dir, "b"), PortBase: 30100, Role: RoleStandalone},
	}}
	for _, c := range st.Clusters {
		require.NoError(t, c.PrepareDirs())
	}
	s := &Session{Dir: dir, Root: dir, State: st}
	t.Cleanup(s.StopAll)
	proc := func(name string) Component {
		// sleep is named after its binary, so PID reuse checks match.
		return Component{Name: name, Binary: sleep, Args: []string{"60"}, Ready: func(context.Context) error { return nil }}
	}
	first, second := proc("sleep"), proc("sleep")
	require.NoError(t, s.Start(context.Background(), "a", first))
	require.NoError(t, s.Start(context.Background(), "b", second))
	require.Error(t, s.Start(context.Background(), "c", first), "an unknown cluster")

	saved, ok := ReadState(dir)
	require.True(t, ok)
	assert.Equal(t, []string{"sleep"}, saved.Clusters[0].Started)
	assert.Equal(t, []string{"sleep"}, saved.Clusters[1].Started)

	for _, c := range saved.Clusters {
		recs, err := ReadPIDFiles(c.PidsDir())
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, c.Name, recs[0].Cluster)
		assert.Equal(t, c.Name+"/sleep", recs[0].Process())
		assert.True(t, recs[0].Alive, recs[0].Note)
		require.NoError(t, Terminate(recs[0], 5*time.Second))
		alive, _ := ProcessMatches(recs[0].PID, "sleep")
		assert.False(t, alive)
	}
}

func TestStopOrderReversesTheStartOrder(t *testing.T) {
	cl := Cluster{Name: "local", Started: []string{"etcd", "kube-apiserver", "manager"}}
	got := cl.StopOrder([]Recorded{{Component: "etcd"}, {Component: "manager"}, {Component: "stray"}, {Component: "kube-apiserver"}})
	var names []string
	for _, r := range got {
		names = append(names, r.Component)
	}
	assert.Equal(t, []string{"stray", "manager", "kube-apiserver", "etcd"}, names)
}

// A process that exits during start fails with its log's tail; one that never turns ready is stopped.
func TestStartReadyFailures(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = StartReady(context.Background(), Component{Name: "sh", Binary: sh, Args: []string{"-c", "echo broken config; exit 3"},
		Ready: func(context.Context) error { return os.ErrNotExist }}, StartOptions{LogPath: filepath.Join(dir, "sh.log")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited during start")
	assert.Contains(t, err.Error(), "broken config")

	_, err = StartReady(context.Background(), Component{Name: "sh", Binary: sh, Args: []string{"-c", "sleep 60"}, StartTimeout: 500 * time.Millisecond,
		Ready: func(context.Context) error { return os.ErrNotExist }}, StartOptions{LogPath: filepath.Join(dir, "sh2.log")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not become ready within 500ms")

	_, err = Start(Component{Name: "nothing", Binary: filepath.Join(dir, "nothing")}, StartOptions{LogPath: filepath.Join(dir, "n.log")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hack/tools.sh nothing")
}
