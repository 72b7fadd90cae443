package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The controllers kube-controller-manager runs here (names as `kube-controller-manager --help` lists them
// in 1.36 and 1.37): enough for Jobs, namespace deletion, ownerReference cleanup and service accounts.
var controllerManagerControllers = []string{
	"garbage-collector-controller",
	"job-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
}

// serviceClusterIPRange is only a range string for the API server's Service allocator; no traffic uses it.
const serviceClusterIPRange = "10.96.0.0/16"

// ports are the loopback ports of one local cluster, all derived from --port-base.
type ports struct {
	APIServer, EtcdClient, EtcdPeer, ControllerManager, Kwok, ManagerMetrics, ManagerHealth, Scheduler, Webhook int
	// The neighbours: Volcano's controller-manager (health) and webhook-manager, the JobSet controller.
	VolcanoHealth, VolcanoWebhook, JobSetWebhook, JobSetHealth int
}

// portCount is how many consecutive ports from --port-base one cluster uses.
const portCount = 13

func portsFrom(base int) ports {
	return ports{
		APIServer: base, EtcdClient: base + 1, EtcdPeer: base + 2, ControllerManager: base + 3,
		Kwok: base + 4, ManagerMetrics: base + 5, ManagerHealth: base + 6, Scheduler: base + 7,
		Webhook: base + 8, VolcanoHealth: base + 9, VolcanoWebhook: base + 10, JobSetWebhook: base + 11,
		JobSetHealth: base + 12,
	}
}

// portUse names a port and the component flag that claims it (for "port in use" messages).
type portUse struct {
	Port int
	Use  string
}

func (p ports) all() []portUse {
	return []portUse{
		{p.APIServer, "kube-apiserver --secure-port"},
		{p.EtcdClient, "etcd client URL"},
		{p.EtcdPeer, "etcd peer URL"},
		{p.ControllerManager, "kube-controller-manager --secure-port"},
		{p.Kwok, "kwok --server-address"},
		{p.ManagerMetrics, "manager --metrics-bind-address"},
		{p.ManagerHealth, "manager --health-probe-bind-address"},
		{p.Scheduler, "scheduler --secure-port"},
		{p.Webhook, "manager --webhook-port"},
		{p.VolcanoHealth, "vc-controller-manager --healthz-address"},
		{p.VolcanoWebhook, "vc-webhook-manager --port"},
		{p.JobSetWebhook, "jobset-controller webhook.port"},
		{p.JobSetHealth, "jobset-controller health.healthProbeBindAddress"},
	}
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// componentSet builds the command lines of every process, in start order.
type componentSet struct {
	Etcd, APIServer, ControllerManager, Kwok, Manager, Scheduler component
	// Neighbours: Volcano's controller-manager and webhook-manager, the JobSet controller (neighbours.go).
	VolcanoControllers, VolcanoWebhook, JobSet component
}

func (l layout) components(p pki) (componentSet, error) {
	pt := l.ports()
	kc := l.kubeconfig()
	tlsClient, err := l.tlsClient(p)
	if err != nil {
		return componentSet{}, err
	}
	bin := func(name string) string { return filepath.Join(l.bin, name) }
	etcdPeer := "http://" + loopback(pt.EtcdPeer)
	etcdClient := "http://" + loopback(pt.EtcdClient)
	serving := []string{"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey}
	delegated := []string{"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc}

	return componentSet{
		Etcd: component{
			Name: "etcd", Binary: bin("etcd"), StartTimeout: 30 * time.Second,
			Args: []string{
				"--name=hyperbatch-local",
				"--data-dir=" + l.etcdDir(),
				"--listen-client-urls=" + etcdClient,
				"--advertise-client-urls=" + etcdClient,
				"--listen-peer-urls=" + etcdPeer,
				"--initial-advertise-peer-urls=" + etcdPeer,
				"--initial-cluster=hyperbatch-local=" + etcdPeer,
				"--initial-cluster-state=new",
				// A throwaway development store: skip fsync so thousands of objects land in seconds.
				"--unsafe-no-fsync=true",
				"--quota-backend-bytes=8589934592",
				"--log-level=warn",
			},
			Ready: httpReady(http.DefaultClient, etcdClient+"/health", `"health":"true"`),
		},
		APIServer: component{
			Name: "kube-apiserver", Binary: bin("kube-apiserver"), StartTimeout: 120 * time.Second,
			Args: append([]string{
				"--etcd-servers=" + etcdClient,
				"--bind-address=127.0.0.1",
				"--advertise-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(pt.APIServer),
				"--cert-dir=" + filepath.Join(p.Dir, "kube-apiserver"),
				"--client-ca-file=" + p.CACert,
				"--authorization-mode=RBAC",
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file=" + p.SAPub,
				"--service-account-signing-key-file=" + p.SAKey,
				"--service-cluster-ip-range=" + serviceClusterIPRange,
				"--allow-privileged=true",
				// Request-header authentication, so components delegating authentication find a complete
				// kube-system/extension-apiserver-authentication ConfigMap.
				"--requestheader-client-ca-file=" + p.CACert,
				"--requestheader-allowed-names=" + frontProxyClientCN,
				"--requestheader-username-headers=X-Remote-User",
				"--requestheader-group-headers=X-Remote-Group",
				"--requestheader-extra-headers-prefix=X-Remote-Extra-",
				"--proxy-client-cert-file=" + p.ProxyCert,
				"--proxy-client-key-file=" + p.ProxyKey,
				// No node-lifecycle controller runs here, so nothing would lift the not-ready taint this
				// plugin puts on new Nodes; kwok reports the nodes Ready instead.
				"--disable-admission-plugins=TaintNodesByCondition",
				// The "kubernetes" Endpoints may not hold a loopback address; nothing reaches the API
				// server through the Service here, so do not reconcile it.
				"--endpoint-reconciler-type=none",
				"--profiling=false",
			}, serving...),
			Ready: httpReady(tlsClient, "https://"+loopback(pt.APIServer)+"/readyz", ""),
		},
		ControllerManager: component{
			Name: "kube-controller-manager", Binary: bin("kube-controller-manager"), StartTimeout: 60 * time.Second,
			Args: append(append([]string{
				"--kubeconfig=" + kc,
				"--controllers=" + strings.Join(controllerManagerControllers, ","),
				"--bind-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(pt.ControllerManager),
				"--cert-dir=" + filepath.Join(p.Dir, "kube-controller-manager"),
				"--leader-elect=false",
				"--root-ca-file=" + p.CACert,
				"--service-account-private-key-file=" + p.SAKey,
				"--profiling=false",
			}, serving...), delegated...),
			Ready: httpReady(tlsClient, "https://"+loopback(pt.ControllerManager)+"/healthz", ""),
		},
		Kwok: component{
			Name: "kwok", Binary: bin("kwok"), StartTimeout: 60 * time.Second,
			// KWOK_WORKDIR keeps kwok from reading a user's ~/.kwok/kwok.yaml; with no config kwok uses its
			// default stages (node-initialize, node-heartbeat, pod-ready, pod-complete, pod-delete).
			Env: []string{"KWOK_WORKDIR=" + filepath.Join(l.dir, "kwok")},
			Args: []string{
				"--kubeconfig=" + kc,
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
				// Node and pod addresses are status strings only; keep them on loopback.
				"--node-ip=127.0.0.1",
				"--cidr=127.64.0.1/10",
				"--server-address=" + loopback(pt.Kwok),
			},
			Ready: httpReady(http.DefaultClient, "http://"+loopback(pt.Kwok)+"/healthz", ""),
		},
		Manager: component{
			Name: "manager", Binary: bin("manager"), StartTimeout: 90 * time.Second,
			Args: []string{
				"--kubeconfig=" + kc,
				"--metrics-bind-address=" + loopback(pt.ManagerMetrics),
				"--health-probe-bind-address=" + loopback(pt.ManagerHealth),
				"--leader-elect=false",
				"--namespace=hyperbatch-system",
				// Webhooks in URL mode on loopback: the manager creates the webhook configurations,
				// generates its CA and serving cert (Secret hyperbatch-system/hyperbatch-webhook-tls)
				// and injects the caBundle, exactly as in a cluster.
				"--webhook-host=127.0.0.1",
				"--webhook-port=" + strconv.Itoa(pt.Webhook),
				"--webhook-url=https://" + loopback(pt.Webhook),
				"--webhook-cert-dir=" + filepath.Join(p.Dir, "webhook-certs"),
			},
			Ready: httpReady(http.DefaultClient, "http://"+loopback(pt.ManagerHealth)+"/readyz", ""),
		},
		Scheduler: component{
			Name: "scheduler", Binary: bin("scheduler"), StartTimeout: 90 * time.Second,
			Args: append(append([]string{
				"--config=" + l.schedulerConfig(),
				"--v=2", // each gang's decision and wait reason (docs/scheduler.md)
				"--bind-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(pt.Scheduler),
			}, serving...), delegated...),
			Ready: httpReady(tlsClient, "https://"+loopback(pt.Scheduler)+"/readyz", ""),
		},
		VolcanoControllers: l.volcanoControllersComponent(),
		VolcanoWebhook:     l.volcanoWebhookComponent(p),
		JobSet:             l.jobSetComponent(),
	}, nil
}

// tlsClient trusts the local CA and presents the admin client certificate.
func (l layout) tlsClient(p pki) (*http.Client, error) {
	caPEM, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", p.CACert)
	}
	cert, err := tls.LoadX509KeyPair(p.AdminCert, p.AdminKey)
	if err != nil {
		return nil, fmt.Errorf("loading admin client certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}, nil
}

// httpReady returns a check that passes when url answers 200 (and the body contains want, if set).
func httpReady(c *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if want != "" && !strings.Contains(string(body), want) {
			return fmt.Errorf("%s answered %s", url, strings.TrimSpace(string(body)))
		}
		return nil
	}
}
