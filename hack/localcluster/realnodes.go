package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// Real nodes (`up --real-nodes N`): N kubelets beside the kwok nodes, each with its own containerd
// (root, state and socket under <dir>/nodes/real-node-<i>/), runc, and the CNI bridge and host-local
// plugins; one kube-proxy for the host. Every pod of every real node sits on one Linux bridge, each
// node allocating from its own /24 of the pod CIDR. The network stays on this machine: the pods get
// a route to the pod CIDR (on the bridge) and to the Service CIDR (through the host) only, the
// bridge plugin masquerades nothing. Forwarding is on for packets entering hb0 only
// (net.ipv4.conf.hb0.forwarding, gone with the bridge; net.ipv4.ip_forward is left alone), and
// the chain HB-REAL-FORWARD lets through hb0 -> hb0 only: a pod reaches a ClusterIP whose
// endpoints are pods, and nothing is forwarded between a pod and an outside interface.
const (
	realBridge      = "hb0"             // the bridge every real node's pods attach to
	realPodCIDR     = "10.244.0.0/16"   // the pods of all real nodes; node i allocates from 10.244.<i+1>.0/24
	realBridgeIP    = "10.244.0.1"      // the bridge's address: the pods' gateway to the Service CIDR
	realNodeIPBase  = 10                // node i's InternalIP is 10.244.0.<10+i>, an address of the bridge
	realNodePrefix  = "real-node"       // node names real-node-<i>
	realCgroupRoot  = "hyperbatch-real" // cgroup /hyperbatch-real-<i> holds node i's runtime and pods
	realMaxNodes    = 8
	realPortOffset  = 38 // kube-proxy healthz, metrics; then kubelet port and healthz per node
	realLeafPrefix  = "real-leaf"
	realSpineName   = "real-spine"
	realImageNS     = "k8s.io" // the containerd namespace the CRI plugin reads images from
	realPinnedLabel = "io.cri-containerd.pinned=pinned"
	// realForwardChain is the filter chain FORWARD jumps to first: hb0 -> hb0 accepted, anything
	// else to or from hb0 dropped. `down` removes it with the KUBE-*/CNI-* chains (realChain).
	realForwardChain = "HB-REAL-FORWARD"
)

// realNodeLabels are the labels every real node registers with: the e2e framework selects them with
// hyperbatch.dev/e2e-node=real (test/e2e/framework/nodes.go).
const (
	realNodeLabel      = "hyperbatch.dev/e2e-node"
	realNodeLabelValue = "real"
)

// The images `make images` writes (hack/tools/images): each node's containerd imports all three.
var realImages = []struct{ Archive, Ref string }{
	{"pause.tar", "hyperbatch.local/pause:dev"},
	{"worker.tar", "hyperbatch.local/worker:dev"},
	{"hyperbatch.tar", "hyperbatch.local/hyperbatch:dev"},
}

// realPauseImage is the pod sandbox image of every real node's containerd.
const realPauseImage = "hyperbatch.local/pause:dev"

// realWorkerImage is the image of the real-node acceptance pod.
const realWorkerImage = "hyperbatch.local/worker:dev"

// realNodeTools are the binaries of a real node (hack/tools.sh builds them; the CNI plugins go to bin/cni/).
var realNodeTools = []string{"kubelet", "kube-proxy", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr", "cni/bridge", "cni/host-local", "cni/loopback"}

// realNodes is the real-node part of one cluster.
type realNodes struct {
	n        int
	dir      string // <cluster dir>/nodes
	bin      string
	images   string // the directory of make images' archives
	portBase int
	cl       localproc.Cluster
}

func newRealNodes(l layout, cl localproc.Cluster, n int) realNodes {
	return realNodes{n: n, dir: realNodesDir(cl.Dir), bin: l.bin, images: l.images, portBase: cl.PortBase, cl: cl}
}

func realNodesDir(clusterDir string) string { return filepath.Join(clusterDir, "nodes") }

func (r realNodes) name(i int) string    { return fmt.Sprintf("%s-%d", realNodePrefix, i) }
func (r realNodes) nodeDir(i int) string { return filepath.Join(r.dir, r.name(i)) }
func (r realNodes) socket(i int) string  { return filepath.Join(r.nodeDir(i), "containerd.sock") }
func (r realNodes) nodeIP(i int) string  { return fmt.Sprintf("10.244.0.%d", realNodeIPBase+i) }
func (r realNodes) cgroup(i int) string  { return fmt.Sprintf("/%s-%d", realCgroupRoot, i) }
func (r realNodes) kubeletPort(i int) int {
	return r.portBase + realPortOffset + 2 + 2*i
}
func (r realNodes) kubeletHealthz(i int) int { return r.kubeletPort(i) + 1 }
func (r realNodes) proxyHealthz() int        { return r.portBase + realPortOffset }
func (r realNodes) proxyMetrics() int        { return r.portBase + realPortOffset + 1 }

// schedulerPort is kube-scheduler's --secure-port: after the kubelet ports of realMaxNodes nodes.
func (r realNodes) schedulerPort() int { return r.portBase + realPortOffset + 2 + 2*realMaxNodes }

// leaf is the leaf HyperNode of node i: the first half of the nodes under real-leaf-0, the rest
// under real-leaf-1.
func (r realNodes) leaf(i int) string {
	if i < (r.n+1)/2 {
		return realLeafPrefix + "-0"
	}
	return realLeafPrefix + "-1"
}

// ports lists the loopback ports of the real nodes with their use.
func (r realNodes) ports() []localproc.PortUse {
	out := []localproc.PortUse{
		{Port: r.proxyHealthz(), Use: "kube-proxy healthzBindAddress"},
		{Port: r.proxyMetrics(), Use: "kube-proxy metricsBindAddress"},
		{Port: r.schedulerPort(), Use: "kube-scheduler --secure-port"},
	}
	for i := 0; i < r.n; i++ {
		out = append(out,
			localproc.PortUse{Port: r.kubeletPort(i), Use: r.name(i) + " kubelet port (on " + r.nodeIP(i) + ")"},
			localproc.PortUse{Port: r.kubeletHealthz(i), Use: r.name(i) + " kubelet healthzPort"})
	}
	return out
}

// realPrereq is one missing prerequisite: its name and the fix.
type realPrereq struct{ name, fix string }

// preflight checks what the real nodes need from the machine and from bin/ and _output/images/,
// and reports every missing piece with its fix.
func (r realNodes) preflight() error {
	if r.n < 2 || r.n > realMaxNodes {
		return fmt.Errorf("--real-nodes %d: want 2..%d (two leaf HyperNodes need at least two nodes; the pod CIDR has room for %d)", r.n, realMaxNodes, realMaxNodes)
	}
	var miss []realPrereq
	if os.Geteuid() != 0 {
		miss = append(miss, realPrereq{"root", "kubelet, containerd and runc need root (namespaces, mounts, cgroups): run `make run REAL_NODES=2` as root"})
	}
	for _, tool := range []struct{ bin, pkg string }{{"runc", "runc"}, {"iptables", "iptables"}, {"iptables-save", "iptables"}, {"iptables-restore", "iptables"}, {"ip", "iproute2"}, {"mount", "mount"}} {
		if _, err := exec.LookPath(tool.bin); err != nil {
			miss = append(miss, realPrereq{tool.bin, "install Debian's " + tool.pkg + ": hack/realnodes-prereqs.sh (apt-get install -y " + tool.pkg + ")"})
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		miss = append(miss, realPrereq{"cgroup v1", "this host mounts cgroup v2 only (unified); the real-node mode drives cgroup v1 (or hybrid) hierarchies only so far"})
	} else {
		for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "cgroup.procs")); err != nil {
				miss = append(miss, realPrereq{"cgroup " + c, "mount the cgroup v1 controller: mkdir -p /sys/fs/cgroup/" + c + " && mount -t cgroup -o " + c + " cgroup /sys/fs/cgroup/" + c})
			}
		}
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\toverlay\n") {
		miss = append(miss, realPrereq{"overlay filesystem", "containerd's overlayfs snapshotter needs it: modprobe overlay"})
	}
	for _, t := range realNodeTools {
		if !isExecutable(filepath.Join(r.bin, t)) {
			miss = append(miss, realPrereq{"bin/" + t, "hack/tools.sh kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr cni-bridge cni-host-local cni-loopback (kubelet and containerd take minutes the first time)"})
		}
	}
	for _, img := range realImages {
		if _, err := os.Stat(filepath.Join(r.images, img.Archive)); err != nil {
			miss = append(miss, realPrereq{"image " + img.Ref, "no " + filepath.Join(r.images, img.Archive) + ": run `make images`"})
		}
	}
	// The bridge and the cgroups have host-wide names: when this directory did not make them, another
	// real-node cluster (another --dir or checkout) owns them, and up's cleanup would tear it down.
	if _, own := readRealState(r.dir); !own {
		if bridgeExists() {
			miss = append(miss, realPrereq{"network interface " + realBridge, "it exists but " + r.dir + " did not make it: another real-node cluster runs (make down in its directory), or remove a leftover with `ip link del " + realBridge + "`"})
		}
		if dirs, _ := realCgroupDirs(); len(dirs) > 0 {
			miss = append(miss, realPrereq{"cgroup " + dirs[len(dirs)-1], "it exists but " + r.dir + " did not make it: another real-node cluster runs (make down in its directory)"})
		}
	}
	for _, pu := range r.ports() {
		if busy, owner := localproc.PortBusy(pu.Port); busy {
			miss = append(miss, realPrereq{fmt.Sprintf("port 127.0.0.1:%d (%s)", pu.Port, pu.Use), "held by " + owner + ": stop it, or move the cluster with --port-base"})
		}
	}
	if len(miss) == 0 {
		return nil
	}
	lines := make([]string, len(miss))
	for i, m := range miss {
		lines[i] = fmt.Sprintf("  %s: %s", m.name, m.fix)
	}
	return fmt.Errorf("the real nodes cannot start; missing:\n%s", strings.Join(lines, "\n"))
}

// realState is what `down` needs to undo the host changes of an `up`, kept in <dir>/nodes/state.json
// from before the first change.
type realState struct {
	N   int    `json:"n"`
	Bin string `json:"bin"`
	// Sysctls are the host's values before the kubelets changed them (the kubelet sets
	// vm.overcommit_memory, kernel.panic and kernel.panic_on_oops unless protectKernelDefaults).
	Sysctls map[string]string `json:"sysctls"`
}

// kubeletSysctls are the kernel settings the kubelet changes on start.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func realStateFile(dir string) string { return filepath.Join(dir, "state.json") }

func readRealState(dir string) (realState, bool) {
	var s realState
	b, err := os.ReadFile(realStateFile(dir))
	if err != nil || json.Unmarshal(b, &s) != nil {
		return s, false
	}
	return s, true
}

// prepare removes what an earlier run left (a crashed up, a kill -9), records the host's sysctls,
// then creates the bridge, the cgroups and each node's configuration.
func (r realNodes) prepare() error {
	if err := cleanupRealNodes(r.dir, r.bin); err != nil {
		return fmt.Errorf("removing what an earlier run of the real nodes left: %w", err)
	}
	st := realState{N: r.n, Bin: r.bin, Sysctls: map[string]string{}}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("reading sysctl %s: %w", k, err)
		}
		st.Sysctls[k] = strings.TrimSpace(string(b))
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", r.dir, err)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(realStateFile(r.dir), b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", realStateFile(r.dir), err)
	}
	if err := r.createBridge(); err != nil {
		return err
	}
	for i := 0; i < r.n; i++ {
		if err := createCgroup(r.cgroup(i)); err != nil {
			return err
		}
		if err := r.writeNodeFiles(i); err != nil {
			return err
		}
	}
	return r.writeProxyConfig()
}

// createBridge creates the pods' bridge with the gateway and the nodes' addresses. The CNI bridge
// plugin finds it and attaches each pod's veth to it.
func (r realNodes) createBridge() error {
	cmds := [][]string{{"link", "add", realBridge, "type", "bridge"}, {"addr", "add", realBridgeIP + "/16", "dev", realBridge}}
	for i := 0; i < r.n; i++ {
		cmds = append(cmds, []string{"addr", "add", r.nodeIP(i) + "/32", "dev", realBridge})
	}
	cmds = append(cmds, []string{"link", "set", realBridge, "up"})
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	// A pod's packet to a ClusterIP is DNATed to another pod and routed back out of hb0: IPv4
	// forwards what enters an interface whose forwarding is on (the input interface decides).
	fwd := "/proc/sys/net/ipv4/conf/" + realBridge + "/forwarding"
	if err := os.WriteFile(fwd, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("switching on forwarding for %s (%s): %w", realBridge, fwd, err)
	}
	rules := [][]string{
		{"-N", realForwardChain},
		{"-A", realForwardChain, "-i", realBridge, "-o", realBridge, "-j", "ACCEPT"},
		{"-A", realForwardChain, "-i", realBridge, "-j", "DROP"},
		{"-A", realForwardChain, "-o", realBridge, "-j", "DROP"},
		{"-I", "FORWARD", "1", "-j", realForwardChain},
	}
	for _, rule := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-t", "filter"}, rule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(rule, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// cgroupHierarchies lists the mounted cgroup hierarchies (v1 controllers, named and unified ones).
func cgroupHierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fs := strings.Fields(post)
		f := strings.Fields(pre)
		if len(fs) > 0 && len(f) > 4 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

// createCgroup creates path in every hierarchy (the kubelet refuses a cgroupRoot missing from one),
// copying the parent's cpuset so that tasks may join it.
func createCgroup(path string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, path)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("writing %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// writeNodeFiles writes node i's containerd configuration, CNI network and kubelet configuration,
// and the named links to the binaries (a PID file's process is recognised by its binary's name).
func (r realNodes) writeNodeFiles(i int) error {
	d := r.nodeDir(i)
	for _, sub := range []string{"cni", "pod-logs", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Join(d, sub), err)
		}
	}
	for _, b := range []string{"containerd", "kubelet"} {
		link := filepath.Join(d, fmt.Sprintf("%s-%d", b, i))
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(r.bin, b), link); err != nil {
			return fmt.Errorf("linking %s: %w", link, err)
		}
	}
	files := map[string]string{
		"containerd.toml":            r.containerdConfig(i),
		"cni/10-hyperbatch.conflist": r.cniConfig(i),
		"kubelet-config.yaml":        r.kubeletConfig(i),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Join(d, name), err)
		}
	}
	return nil
}

func (r realNodes) containerdConfig(i int) string {
	d := r.nodeDir(i)
	return fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

# containerd moves itself (and so its shims) into the node's cgroup; down kills what is left there.
[cgroup]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  # Without CAP_SYS_RESOURCE (a sandboxed root) no process may lower its oom_score_adj, and runc fails
  # every pod sandbox (the kubelet asks -998); then the scores are clamped at containerd's own.
  restrict_oom_score_adj = %t
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state per node, below the node's directory (not /run/containerd/runc).
        Root = %q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
    max_conf_num = 1

# NRI's socket is one path per host; two containerds would fight over it.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
`, filepath.Join(d, "containerd", "root"), filepath.Join(d, "containerd", "state"), r.socket(i), r.socket(i)+".ttrpc",
		r.cgroup(i)+"/runtime", realPauseImage, !hasCapSysResource(), filepath.Join(d, "runc"), filepath.Join(r.bin, "cni"), filepath.Join(d, "cni"))
}

// cniConfig is node i's network: the shared bridge, addresses from the node's /24, routes to the pod
// CIDR (on the bridge) and the Service CIDR (through the host) only, and no masquerade.
func (r realNodes) cniConfig(i int) string {
	c := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "hyperbatch-real",
		"plugins": []any{map[string]any{
			// isGateway would switch on net.ipv4.ip_forward for the whole host; the bridge has its
			// gateway address already (createBridge), and the routes below name it.
			"type": "bridge", "bridge": realBridge, "isGateway": false, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": filepath.Join(r.nodeDir(i), "cni-ipam"),
				"ranges": [][]map[string]string{{{
					"subnet": realPodCIDR, "gateway": realBridgeIP,
					"rangeStart": fmt.Sprintf("10.244.%d.2", i+1), "rangeEnd": fmt.Sprintf("10.244.%d.254", i+1),
				}}},
				"routes": []map[string]string{{"dst": localproc.ServiceClusterIPRange, "gw": realBridgeIP}},
			},
		}},
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	return string(b) + "\n"
}

func (r realNodes) kubeletConfig(i int) string {
	d := r.nodeDir(i)
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts cgroup v1; Kubernetes 1.35+ refuses it unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
podLogsDir: %s
failSwapOn: false
# Imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute disk thresholds: the nodes share this machine's disk, which may be large and nearly full
# (a 252 GB disk with 3 GB free crossed 1%% and every new pod was rejected with DiskPressure; other
# builds took it down to 1 GB free, of which the nodes' containerds need about 0.7 GB).
evictionHard: {memory.available: "50Mi", nodefs.available: "100Mi", imagefs.available: "100Mi", nodefs.inodesFree: "1%%"}
maxPods: 32
resolvConf: ""
serializeImagePulls: false
`, r.cgroup(i), r.socket(i), r.nodeIP(i), r.kubeletPort(i), r.kubeletHealthz(i), r.cl.PKI().CACert, filepath.Join(d, "pod-logs"))
}

func (r realNodes) proxyConfigFile() string { return filepath.Join(r.dir, "kube-proxy-config.yaml") }

func (r realNodes) writeProxyConfig() error {
	c := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: iptables
hostnameOverride: %s
clusterCIDR: %s
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
# NodePorts only on the nodes' addresses, never on an outside interface or on localhost.
nodePortAddresses: [%s/32]
iptables: {localhostNodePorts: false, masqueradeAll: false}
# Zeros leave the host's conntrack settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, r.cl.Kubeconfig(), r.name(0), realPodCIDR, r.proxyHealthz(), r.proxyMetrics(), r.nodeIP(0))
	if err := os.WriteFile(r.proxyConfigFile(), []byte(c), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", r.proxyConfigFile(), err)
	}
	return nil
}

// hasCapSysResource reports whether this process has CAP_SYS_RESOURCE (bit 24 of CapEff), which
// lowering an oom_score_adj needs.
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<24) != 0
		}
	}
	return false
}

// runtimes are the nodes' containerds, started together.
func (r realNodes) runtimes() localproc.Stage {
	var s localproc.Stage
	for i := 0; i < r.n; i++ {
		sock := r.socket(i)
		s = append(s, localproc.Component{
			Name:   fmt.Sprintf("containerd-%d", i),
			Binary: filepath.Join(r.nodeDir(i), fmt.Sprintf("containerd-%d", i)),
			Args:   []string{"--config=" + filepath.Join(r.nodeDir(i), "containerd.toml"), "--log-level=info"},
			// containerd finds its shim, and the shim runc, on PATH.
			Env:          []string{"PATH=" + r.bin + ":" + os.Getenv("PATH")},
			StartTimeout: 60 * time.Second,
			Ready: func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, filepath.Join(r.bin, "ctr"), "--address", sock, "version").CombinedOutput()
				if err != nil {
					return fmt.Errorf("ctr version: %w: %s", err, strings.TrimSpace(string(out)))
				}
				return nil
			},
		})
	}
	return s
}

// kubelets are the nodes' kubelets and the host's kube-proxy, started together.
func (r realNodes) kubelets() localproc.Stage {
	var s localproc.Stage
	for i := 0; i < r.n; i++ {
		labels := fmt.Sprintf("%s=%s,%s=%s,%s=%s", realNodeLabel, realNodeLabelValue, labelLeaf, r.leaf(i), labelSpine, realSpineName)
		s = append(s, localproc.Component{
			Name:   fmt.Sprintf("kubelet-%d", i),
			Binary: filepath.Join(r.nodeDir(i), fmt.Sprintf("kubelet-%d", i)),
			Args: []string{
				"--config=" + filepath.Join(r.nodeDir(i), "kubelet-config.yaml"),
				"--kubeconfig=" + r.cl.Kubeconfig(),
				"--root-dir=" + filepath.Join(r.nodeDir(i), "kubelet"),
				"--hostname-override=" + r.name(i),
				"--node-ip=" + r.nodeIP(i),
				"--node-labels=" + labels,
				"--v=1",
			},
			StartTimeout: 90 * time.Second,
			Ready:        localproc.HTTPReady(http.DefaultClient, "http://"+localproc.Loopback(r.kubeletHealthz(i))+"/healthz", "ok"),
		})
	}
	s = append(s, localproc.Component{
		Name: "kube-proxy", Binary: filepath.Join(r.bin, "kube-proxy"),
		Args:         []string{"--config=" + r.proxyConfigFile(), "--v=1"},
		StartTimeout: 60 * time.Second,
		Ready:        localproc.HTTPReady(http.DefaultClient, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(r.proxyHealthz()))+"/healthz", ""),
	})
	return append(s, r.kubeScheduler())
}

// kubeScheduler is the cluster's default scheduler, for real-node pods that name no scheduler (the
// Helm chart's manager and scheduler pods); hyperbatch-scheduler keeps the pods that name it. It
// serves its health endpoint on 127.0.0.1 with the cluster's serving certificate.
func (r realNodes) kubeScheduler() localproc.Component {
	p := r.cl.PKI()
	kc := r.cl.Kubeconfig()
	ready := func(ctx context.Context) error {
		tc, err := p.TLSClient()
		if err != nil {
			return err
		}
		return localproc.HTTPReady(tc, "https://"+localproc.Loopback(r.schedulerPort())+"/healthz", "ok")(ctx)
	}
	return localproc.Component{
		Name: "kube-scheduler", Binary: filepath.Join(r.bin, "kube-scheduler"), StartTimeout: 60 * time.Second,
		Args: []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(r.schedulerPort()),
			"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
			"--leader-elect=false", "--profiling=false", "--v=1",
		},
		Ready: ready,
	}
}

// importImages loads make images' archives into every node's containerd (the CRI plugin's namespace),
// pins them against the kubelet's image garbage collection, and checks each is listed afterwards.
func (r realNodes) importImages(ctx context.Context) error {
	ctr := filepath.Join(r.bin, "ctr")
	for i := 0; i < r.n; i++ {
		for _, img := range realImages {
			archive := filepath.Join(r.images, img.Archive)
			if _, err := os.Stat(archive); err != nil {
				return fmt.Errorf("image %s: archive %s is missing: run `make images`", img.Ref, archive)
			}
			base := []string{"--address", r.socket(i), "--namespace", realImageNS}
			if out, err := exec.CommandContext(ctx, ctr, append(base, "images", "import", archive)...).CombinedOutput(); err != nil {
				return fmt.Errorf("image %s: ctr images import %s into %s: %w: %s", img.Ref, archive, r.name(i), err, strings.TrimSpace(string(out)))
			}
			out, err := exec.CommandContext(ctx, ctr, append(base, "images", "label", img.Ref, realPinnedLabel)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("image %s is not in %s's containerd after importing %s (ctr images label: %w: %s); rebuild it with `make images`",
					img.Ref, r.name(i), archive, err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}
