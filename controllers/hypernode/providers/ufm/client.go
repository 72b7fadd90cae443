package ufm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
)

// The UFM REST resources read: every system (switches and hosts) and every link between them.
const (
	systemsPath = "/ufmRest/resources/systems"
	linksPath   = "/ufmRest/resources/links"
	// maxBody bounds one response (100 MiB), so a misbehaving server cannot exhaust the manager.
	maxBody = 100 << 20
)

// System is one entry of GET /ufmRest/resources/systems (the fields read).
type System struct {
	GUID string `json:"system_guid"`
	Name string `json:"system_name"`
	// Type is "switch", "host", "gateway" or "router"; only switches and hosts are read.
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// Link is one entry of GET /ufmRest/resources/links (the fields read): a cable between two
// systems, by system GUID.
type Link struct {
	SourceGUID      string `json:"source_guid"`
	SourcePort      any    `json:"source_port,omitempty"`
	DestinationGUID string `json:"destination_guid"`
	DestinationPort any    `json:"destination_port,omitempty"`
}

// Client reads a UFM server.
type Client struct {
	base     *url.URL
	http     *http.Client
	username string
	password string
}

// ClientOptions configure NewClient.
type ClientOptions struct {
	Endpoint string
	// InsecureSkipVerify turns TLS verification off (never the default).
	InsecureSkipVerify bool
	// CAPEM are extra trusted CA certificates (PEM), added to the system pool.
	CAPEM              []byte
	Username, Password string
	Timeout            time.Duration
}

// NewClient checks the endpoint and builds the client.
func NewClient(o ClientOptions) (*Client, error) {
	ep := o.Endpoint
	if ep == "" {
		return nil, fmt.Errorf("config.endpoint is empty: set the UFM server's URL, e.g. https://ufm.example.com")
	}
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("config.endpoint %q is not a URL such as https://ufm.example.com", o.Endpoint)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("config.endpoint %q: use https; UFM credentials must not cross the network in clear text", o.Endpoint)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify} //nolint:gosec // off only when config.insecureSkipVerify says so
	if len(o.CAPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(o.CAPEM) {
			return nil, fmt.Errorf("config.caFile holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	return &Client{base: u, http: &http.Client{Transport: tr, Timeout: o.Timeout}, username: o.Username, password: o.Password}, nil
}

// Fabric reads systems and links and returns the fabric graph.
func (c *Client) Fabric(ctx context.Context) (*fabric.Graph, error) {
	var systems []System
	if err := c.get(ctx, systemsPath, &systems); err != nil {
		return nil, err
	}
	var links []Link
	if err := c.get(ctx, linksPath, &links); err != nil {
		return nil, err
	}
	return BuildGraph(systems, links)
}

// BuildGraph turns UFM's systems and links into a fabric graph. Links to systems that are neither
// switch nor host (gateways, routers) are left out.
func BuildGraph(systems []System, links []Link) (*fabric.Graph, error) {
	g := fabric.NewGraph()
	for i, s := range systems {
		guid, err := fabric.NormalizeGUID(s.GUID)
		if err != nil {
			return nil, fmt.Errorf("systems[%d].system_guid: %w", i, err)
		}
		switch strings.ToLower(s.Type) {
		case "switch":
			g.Add(guid, fabric.Switch, s.Name)
		case "host":
			g.Add(guid, fabric.Host, s.Name)
		}
	}
	for i, l := range links {
		a, err := fabric.NormalizeGUID(l.SourceGUID)
		if err != nil {
			return nil, fmt.Errorf("links[%d].source_guid: %w", i, err)
		}
		b, err := fabric.NormalizeGUID(l.DestinationGUID)
		if err != nil {
			return nil, fmt.Errorf("links[%d].destination_guid: %w", i, err)
		}
		if g.Devices[a] != nil && g.Devices[b] != nil {
			g.Link(a, b)
		}
	}
	if g.Stats().Switches == 0 {
		return nil, fmt.Errorf("UFM reported no switch (%d systems)", len(systems))
	}
	return g, nil
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(c.username, c.password)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.String(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = ": check the username and password in the credentials Secret"
		}
		return fmt.Errorf("GET %s: %s%s", u.String(), resp.Status, hint)
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxBody))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("GET %s: decoding the response: %w", u.String(), err)
	}
	return nil
}
