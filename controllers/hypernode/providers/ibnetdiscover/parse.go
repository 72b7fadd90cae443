package ibnetdiscover

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
)

var (
	// Switch	36 "S-0002c90300a0b0c0"		# "MF0;leaf01:MSB7700/U1" enhanced port 0 lid 3 lmc 0
	// Ca	2 "H-0002c903000a0b0c"		# "node01 mlx5_0"
	headerRE = regexp.MustCompile(`^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"([^"]*)")?`)
	// [1]	"H-0002c903000a0b0c"[1](2c903000a0b0d)		# "node01 mlx5_0" lid 5 4xEDR
	// [1](2c903000a0b0d)	"S-0002c90300a0b0c0"[1]		# lid 5 lmc 0 "MF0;leaf01:MSB7700/U1" lid 3 4xEDR
	portRE = regexp.MustCompile(`^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*(?:#\s*(?:"([^"]*)")?)?`)
)

// Parse reads ibnetdiscover's default text output into a fabric graph: switches, hosts (one per host
// name, with the GUIDs of its HCAs) and the links between them. Routers are left out.
func Parse(r io.Reader) (*fabric.Graph, error) {
	type node struct {
		kind string // S, H, R
		desc string
	}
	nodes := map[string]*node{}
	type link struct{ a, b string }
	var links []link
	describe := func(guid, kind, desc string) {
		n := nodes[guid]
		if n == nil {
			n = &node{kind: kind}
			nodes[guid] = n
		}
		if n.desc == "" {
			n.desc = desc
		}
	}

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	current := ""
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "Switch") || strings.HasPrefix(line, "Ca") || strings.HasPrefix(line, "Rt"):
			m := headerRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: %q is not a node line such as `Switch 36 \"S-<guid>\" # \"<description>\"`", lineNo, line)
			}
			guid, err := fabric.NormalizeGUID(m[4])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			current = guid
			describe(guid, m[3], m[5])
		case strings.HasPrefix(line, "["):
			if current == "" {
				return nil, fmt.Errorf("line %d: port line before any Switch or Ca line", lineNo)
			}
			m := portRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: %q is not a port line such as `[1] \"H-<guid>\"[1] # \"<description>\"`", lineNo, line)
			}
			peer, err := fabric.NormalizeGUID(m[3])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			// In a switch's block the comment describes the peer; in a CA's it starts with the CA's
			// own lid, and the quoted text is the peer's, too.
			describe(peer, m[2], m[5])
			links = append(links, link{current, peer})
		default:
			// vendid=, devid=, sysimgguid=, switchguid=, caguid= and similar: not needed.
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading ibnetdiscover output: %w", err)
	}

	g := fabric.NewGraph()
	key := func(guid string) (string, bool) {
		n := nodes[guid]
		switch n.kind {
		case "S":
			return guid, true
		case "H":
			if h, ok := hostName(n.desc); ok {
				return "host:" + strings.ToLower(h), true
			}
		}
		return "", false
	}
	for guid, n := range nodes {
		k, ok := key(guid)
		if !ok {
			if n.kind == "H" {
				g.Skipped[skipReason(n.desc)]++
			}
			continue
		}
		if n.kind == "S" {
			g.Add(k, fabric.Switch, switchName(n.desc))
			continue
		}
		h, _ := hostName(n.desc)
		g.Add(k, fabric.Host, h)
		d := g.Devices[k]
		d.Aliases = append(d.Aliases, guid)
	}
	for _, l := range links {
		a, okA := key(l.a)
		b, okB := key(l.b)
		if okA && okB {
			g.Link(a, b)
		}
	}
	if s := g.Stats(); s.Switches == 0 {
		return nil, errors.New("the ibnetdiscover output names no switch: is it the output of `ibnetdiscover` (not `ibnetdiscover -p` or `-l`)?")
	}
	return g, nil
}

// Reasons a CA is not a host (fabric.Graph.Skipped).
const (
	SkipAggregationNode = "SHARP aggregation node"
	SkipUnconfigured    = "HCA without a host name (description is not \"<host> <HCA>\")"
)

// hostName is the host part of a CA's node description. A host's HCA describes itself as exactly
// "<host> <HCA>" ("node01 mlx5_0", "a06-p1-dgx-02-c01 HCA-6"), which is what the driver writes once
// the host name is set. Two kinds of CA are not hosts and report false:
//   - a switch's SHARP aggregation node, "Mellanox Technologies Aggregation Node", which every
//     switch carries (spines included): taken as a host it would make every switch a leaf;
//   - an HCA whose description was never set and still reads as the adapter's model,
//     "MT4129 ConnectX7   Mellanox Technologies": taken as a host named MT4129 it would join
//     every leaf it touches.
func hostName(desc string) (string, bool) {
	f := strings.Fields(desc)
	if len(f) != 2 || isModel(f[0]) {
		return "", false
	}
	return f[0], true
}

func skipReason(desc string) string {
	if strings.Contains(desc, "Aggregation Node") {
		return SkipAggregationNode
	}
	return SkipUnconfigured
}

// isModel reports whether w is a Mellanox device ID such as MT4129 (an unconfigured description).
func isModel(w string) bool {
	if len(w) < 3 || !strings.HasPrefix(w, "MT") {
		return false
	}
	for _, r := range w[2:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// switchName is the readable part of a switch's node description ("MF0;leaf01:MSB7700/U1" → leaf01).
func switchName(desc string) string {
	if i := strings.IndexByte(desc, ';'); i >= 0 {
		desc = desc[i+1:]
	}
	if i := strings.IndexByte(desc, ':'); i >= 0 {
		desc = desc[:i]
	}
	return desc
}
