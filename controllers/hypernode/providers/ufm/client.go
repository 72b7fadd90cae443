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
	"regexp"
	"slices"
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
	// GUID is the system's GUID: a switch chassis (every ASIC of a director shares it) or a host's
	// HCA card.
	GUID string `json:"system_guid"`
	// DeviceGUID is the entry's own node GUID (UFM's "guid"): one ASIC of a director, one HCA. Links
	// name these, not the system GUID. Optional: older responses omit it.
	DeviceGUID string `json:"guid,omitempty"`
	// Name is the node description: "<host> <HCA>" for a host ("mtlx859 HCA-1"), "MF0;<name>:<model>/<ASIC>"
	// for a switch ASIC.
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

// Reasons an entry is left out of the graph (fabric.Graph.Skipped).
const (
	SkipUnconfigured = "host entry without a host name (an unconfigured HCA or a gateway)"
	SkipOtherType    = "system that is neither switch nor host"
	SkipLinkEnd      = "link to a GUID that no kept system has"
)

// BuildGraph turns UFM's systems and links into a fabric graph.
//
// Real UFM responses differ from a one-entry-per-device list in three ways, handled here:
//   - a link names the GUIDs of the devices it joins (UFM's "guid": one HCA, one switch ASIC), not
//     their system GUID, so every GUID of an entry resolves to its device;
//   - a director switch (e.g. CS7520) is one system with many ASICs, one entry each with the same
//     system_guid: they become one switch, and the links inside the chassis vanish;
//   - a host's entries are its HCAs, named "<host> <HCA>" ("mtlx859 HCA-1"), sometimes with different
//     system GUIDs: entries with the same host part are one host, named by that part, so Nodes match
//     it by name. An entry whose name is no host name ("MT4115 ConnectX4 Mellanox Technologies", a
//     gateway's "MF0;...:MSX6710/GW") is left out, with its links.
//
// Systems that are neither switch nor host are left out too; Graph.Skipped counts what was left out.
func BuildGraph(systems []System, links []Link) (*fabric.Graph, error) {
	g := fabric.NewGraph()
	device := map[string]string{} // any GUID of a kept entry → its device key
	for i, s := range systems {
		sys, err := fabric.NormalizeGUID(s.GUID)
		if err != nil {
			return nil, fmt.Errorf("systems[%d].system_guid: %w", i, err)
		}
		guids := []string{sys}
		if s.DeviceGUID != "" {
			dev, err := fabric.NormalizeGUID(s.DeviceGUID)
			if err != nil {
				return nil, fmt.Errorf("systems[%d].guid: %w", i, err)
			}
			guids = append(guids, dev)
		}
		var key string
		switch strings.ToLower(s.Type) {
		case "switch":
			key = sys
			g.Add(key, fabric.Switch, switchName(s.Name))
		case "host":
			h, ok := hostName(s.Name)
			if !ok {
				g.Skipped[SkipUnconfigured]++
				continue
			}
			key = "host:" + strings.ToLower(h)
			g.Add(key, fabric.Host, h)
		default:
			g.Skipped[SkipOtherType]++
			continue
		}
		d := g.Devices[key]
		for _, guid := range guids {
			if _, ok := device[guid]; !ok {
				device[guid] = key
				if guid != key && !slices.Contains(d.Aliases, guid) {
					d.Aliases = append(d.Aliases, guid)
				}
			}
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
		da, okA := device[a]
		db, okB := device[b]
		if !okA || !okB {
			g.Skipped[SkipLinkEnd]++
			continue
		}
		g.Link(da, db)
	}
	if g.Stats().Switches == 0 {
		return nil, fmt.Errorf("UFM reported no switch (%d systems)", len(systems))
	}
	return g, nil
}

// hostName is the host part of a host entry's name: its first word, when that is a host name
// (letters, digits, '.', '-', '_') and not an adapter model such as MT4115.
func hostName(name string) (string, bool) {
	f := strings.Fields(name)
	if len(f) == 0 || !hostRE.MatchString(f[0]) || modelRE.MatchString(f[0]) {
		return "", false
	}
	return f[0], true
}

var (
	hostRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	modelRE = regexp.MustCompile(`^MT\d+$`)
)

// switchName is the readable part of a switch's name ("MF0;SW01-Pri:CS7520/L02/U1" → SW01-Pri).
func switchName(name string) string {
	if i := strings.IndexByte(name, ';'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return name
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
