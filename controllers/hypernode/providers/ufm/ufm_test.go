package ufm_test

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ufm"
)

// ufmServer serves the golden payloads of fabric over TLS, behind basic auth, and counts requests.
func ufmServer(t *testing.T, fabric string, requests *int) *httptest.Server {
	t.Helper()
	dir := filepath.Join(hypernodetest.FabricTestdata, "ufm", fabric)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*requests++
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		file := map[string]string{"/ufmRest/resources/systems": "systems.json", "/ufmRest/resources/links": "links.json"}[r.URL.Path]
		if file == "" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		http.ServeFile(w, r, filepath.Join(dir, file))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func caPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func provider(t *testing.T, srv *httptest.Server, extra map[string]any, secret map[string][]byte) *ufm.Provider {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, caPEM(srv), 0o600))
	cfg := map[string]any{"endpoint": srv.URL, "caFile": caFile}
	for k, v := range extra {
		cfg[k] = v
	}
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ufm-credentials", Namespace: "ops"}, Data: secret})
	p, err := ufm.NewProvider(config.Source{
		Source: ufm.Source, Enabled: true,
		Credentials: &config.Credentials{SecretRef: &config.SecretRef{Name: "ufm-credentials", Namespace: "ops"}},
		Config:      cfg,
	}, hypernode.Deps{Nodes: hypernodetest.NodeLister(hypernodetest.GoldenNodes()), Kube: kube, Log: logr.Discard()})
	require.NoError(t, err)
	return p
}

var goodSecret = map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret")}

// The golden UFM payloads give the same trees as the ibnetdiscover dumps of the same fabrics.
func TestGoldenFabrics(t *testing.T) {
	for _, name := range hypernodetest.GoldenFabrics {
		t.Run(name, func(t *testing.T) {
			var n int
			p := provider(t, ufmServer(t, name, &n), nil, goodSecret)
			groups, err := p.Discover()
			require.NoError(t, err)
			hns, err := hypernode.Build(ufm.Source, groups, nil)
			require.NoError(t, err)
			hypernodetest.CheckGolden(t, filepath.Join(hypernodetest.FabricTestdata, "expected", name+".txt"), hypernodetest.Render(hns))
			assert.Equal(t, 2, n, "one request for systems, one for links")

			// A second round within the interval reuses the fabric; Refresh reads UFM again.
			_, err = p.Discover()
			require.NoError(t, err)
			assert.Equal(t, 2, n)
			p.Refresh()
			_, err = p.Discover()
			require.NoError(t, err)
			assert.Equal(t, 4, n)
		})
	}
}

// TLS verification is on by default: without the CA the server's certificate is refused;
// insecureSkipVerify (Volcano's field) turns it off.
func TestTLSVerification(t *testing.T) {
	var n int
	srv := ufmServer(t, "two-tier", &n)
	c, err := ufm.NewClient(ufm.ClientOptions{Endpoint: srv.URL, Username: "admin", Password: "s3cret"})
	require.NoError(t, err)
	_, err = c.Fabric(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
	assert.Zero(t, n, "no request may reach a server whose certificate failed")

	c, err = ufm.NewClient(ufm.ClientOptions{Endpoint: srv.URL, Username: "admin", Password: "s3cret", InsecureSkipVerify: true})
	require.NoError(t, err)
	g, err := c.Fabric(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 6, g.Stats().Switches)
}

func TestFailures(t *testing.T) {
	var n int
	srv := ufmServer(t, "two-tier", &n)

	p := provider(t, srv, nil, map[string][]byte{"username": []byte("admin"), "password": []byte("wrong")})
	_, err := p.Discover()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
	assert.Contains(t, err.Error(), "credentials Secret")

	p = provider(t, srv, nil, map[string][]byte{"username": []byte("admin")})
	_, err = p.Discover()
	assert.ErrorContains(t, err, "needs keys username and password")

	_, err = ufm.NewClient(ufm.ClientOptions{Endpoint: "http://ufm.example.com"})
	assert.ErrorContains(t, err, "use https")

	_, err = ufm.NewProvider(config.Source{Source: ufm.Source, Config: map[string]any{"endpoint": srv.URL}},
		hypernode.Deps{Nodes: hypernodetest.NodeLister(nil), Kube: fake.NewClientset(), Log: logr.Discard()})
	assert.ErrorContains(t, err, "credentials.secretRef is missing")

	_, err = ufm.NewProvider(config.Source{Source: ufm.Source, Config: map[string]any{"endpoint": srv.URL, "insecureSkipVerfy": true}},
		hypernode.Deps{Nodes: hypernodetest.NodeLister(nil), Kube: fake.NewClientset(), Log: logr.Discard()})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), `unknown field "insecureSkipVerfy"`), err.Error())
}

func TestBuildGraphErrors(t *testing.T) {
	_, err := ufm.BuildGraph([]ufm.System{{GUID: "zz", Type: "switch"}}, nil)
	assert.ErrorContains(t, err, "systems[0].system_guid")
	_, err = ufm.BuildGraph([]ufm.System{{GUID: "0x1", Type: "host"}}, nil)
	assert.ErrorContains(t, err, "no switch")
	_, err = ufm.BuildGraph([]ufm.System{{GUID: "0x1", Type: "switch"}}, []ufm.Link{{SourceGUID: "0x1", DestinationGUID: ""}})
	assert.ErrorContains(t, err, "links[0].destination_guid")
}
