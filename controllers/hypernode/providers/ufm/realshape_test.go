package ufm_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ufm"
)

// realShape reproduces, in a small fabric, what real UFM responses look like (measured on the
// systems.json/links.json UFM sample of Mellanox/ufm_sdk_3.0's NDT plugin: 756 entries for 725
// systems, 1,034 links of which 364 name a GUID that is no system_guid):
//   - every entry has its own "guid" (one HCA, one switch ASIC) and links name those;
//   - a director (CS7520) is one system_guid with one entry per ASIC, named ".../L01/U1",
//     ".../S01/U1", with links inside the chassis;
//   - a host's HCAs are entries named "<host> <HCA>", sometimes with different system GUIDs
//     ("mtlzfs01 PCIe 10", "mtlzfs01 PCIe 11");
//   - an unconfigured HCA ("MT4115 ConnectX4   Mellanox Technologies") and a gateway
//     ("MF0;...:MSX6710/GW") are entries of type host.
const realShapeSystems = `[
 {"guid":"7cfe900300f73fc0","system_guid":"248a07030077c3b0","system_name":"MF0;DC-IB-Barracuda-SW01-Pri:CS7520/L01/U1","type":"switch","model":"MT_2080110032","description":"MT_2080110032"},
 {"guid":"7cfe900300fff0c0","system_guid":"248a07030077c3b0","system_name":"MF0;DC-IB-Barracuda-SW01-Pri:CS7520/S01/U1","type":"switch","model":"MT_2080110032","description":"MT_2080110032"},
 {"guid":"7cfe900300f73d80","system_guid":"248a07030077c3b0","system_name":"MF0;DC-IB-Barracuda-SW01-Pri:CS7520/L02/U1","type":"switch","model":"MT_2080110032","description":"MT_2080110032"},
 {"guid":"506b4b0300854600","system_guid":"506b4b0300854600","system_name":"MF0;DC-SW215:MSB7800/U1","type":"switch","model":"MT_2630110032","description":"MT_2630110032"},
 {"guid":"506b4b0300854640","system_guid":"506b4b0300854640","system_name":"MF0;DC-SW216:MSB7800/U1","type":"switch","model":"MT_2630110032","description":"MT_2630110032"},
 {"guid":"506b4b0300854680","system_guid":"506b4b0300854680","system_name":"MF0;DC-SW217:MSB7800/U1","type":"switch","model":"MT_2630110032","description":"MT_2630110032"},
 {"guid":"b8cef60300158020","system_guid":"b8cef60300158020","system_name":"mtlx859 HCA-1","type":"host","description":"server"},
 {"guid":"b8cef60300158021","system_guid":"b8cef60300158020","system_name":"mtlx859 HCA-2","type":"host","description":"server"},
 {"guid":"506b4b0300dbf42c","system_guid":"506b4b0300dbf42c","system_name":"mtlzfs01 PCIe 10","type":"host","description":"server"},
 {"guid":"506b4b0300dbf52c","system_guid":"506b4b0300dbf52c","system_name":"mtlzfs01 PCIe 11","type":"host","description":"server"},
 {"guid":"248a070300a29d74","system_guid":"248a070300a29d74","system_name":"mtlx860 mlx5_0","type":"host","description":"server"},
 {"guid":"e41d2d0300b016b1","system_guid":"e41d2d0300b016b1","system_name":"MT4115 ConnectX4   Mellanox Technologies","type":"host","description":"server"},
 {"guid":"0002c903000d0a01","system_guid":"0002c903000d0a01","system_name":"MF0;GW01:MSX6710/GW","type":"host","description":"server"}
]`

// Links as UFM lists them: by device GUID, with 0x, and the director's inside links.
const realShapeLinks = `[
 {"source_guid":"0x7cfe900300f73fc0","source_port":"1","destination_guid":"0x7cfe900300fff0c0","destination_port":"1"},
 {"source_guid":"0x7cfe900300f73d80","source_port":"1","destination_guid":"0x7cfe900300fff0c0","destination_port":"2"},
 {"source_guid":"0x506b4b0300854600","source_port":"37","destination_guid":"0x7cfe900300f73fc0","destination_port":"5"},
 {"source_guid":"0x506b4b0300854640","source_port":"37","destination_guid":"0x7cfe900300f73fc0","destination_port":"6"},
 {"source_guid":"0x506b4b0300854680","source_port":"37","destination_guid":"0x7cfe900300f73d80","destination_port":"5"},
 {"source_guid":"0x506b4b0300854600","source_port":"1","destination_guid":"0xb8cef60300158020","destination_port":"1"},
 {"source_guid":"0x506b4b0300854640","source_port":"1","destination_guid":"0xb8cef60300158021","destination_port":"1"},
 {"source_guid":"0x506b4b0300854680","source_port":"1","destination_guid":"0x506b4b0300dbf42c","destination_port":"1"},
 {"source_guid":"0x506b4b0300854680","source_port":"2","destination_guid":"0x506b4b0300dbf52c","destination_port":"1"},
 {"source_guid":"0x248a070300a29d74","source_port":"1","destination_guid":"0x506b4b0300854680","destination_port":"3"},
 {"source_guid":"0x506b4b0300854680","source_port":"4","destination_guid":"0xe41d2d0300b016b1","destination_port":"1"},
 {"source_guid":"0x506b4b0300854600","source_port":"4","destination_guid":"0xe41d2d0300b016b1","destination_port":"1"},
 {"source_guid":"0x0002c903000d0a01","source_port":"1","destination_guid":"0x506b4b0300854640","destination_port":"9"}
]`

func TestRealShapedResponses(t *testing.T) {
	var systems []ufm.System
	var links []ufm.Link
	require.NoError(t, json.Unmarshal([]byte(realShapeSystems), &systems))
	require.NoError(t, json.Unmarshal([]byte(realShapeLinks), &links))
	g, err := ufm.BuildGraph(systems, links)
	require.NoError(t, err)
	// 4 switches (the director's three ASICs are one), 3 hosts (mtlx859's two HCAs one host,
	// mtlzfs01's two systems one host); no link lost but the three to the entries left out.
	assert.Equal(t, fabric.Stats{Switches: 4, Hosts: 3, Links: 7}, g.Stats())
	assert.Equal(t, map[string]int{ufm.SkipUnconfigured: 2, ufm.SkipLinkEnd: 3}, g.Skipped)

	// Nodes are named by the host part of "<host> <HCA>", as kubelet names them.
	nodes := hypernodetest.Nodes(nil, "mtlx859", "mtlzfs01", "mtlx860.example.com")
	hns, err := hypernode.Build(ufm.Source, g.Groups(fabric.NodeMatcher(nodes, "")), nil)
	require.NoError(t, err)
	// SW215 and SW216 share mtlx859 (one HCA on each): one rail-optimised leaf. The director is
	// one spine above both leaves.
	assert.Equal(t, `2 spine spine-248a07030077c3b0: leaf-506b4b0300854600 leaf-506b4b0300854680
1 leaf leaf-506b4b0300854600: mtlx859
1 leaf leaf-506b4b0300854680: mtlx860.example.com mtlzfs01
`, hypernodetest.Render(hns))

	// A node label holding any HCA GUID of a host maps it, too.
	byGUID := hypernodetest.Nodes(nil, "n1")
	byGUID[0].Labels["example.com/hca"] = "0xb8cef60300158021"
	_, ok := fabric.NodeMatcher(byGUID, "example.com/hca")(g.Devices["host:mtlx859"])
	assert.True(t, ok)
}

// A switch with no host below it (issue 38): a leaf switch whose hosts are not in UFM, cabled only
// to the director, is tiered one above the director by its distance to the nearest leaf. It is no
// core and becomes no HyperNode; the director stays the root with both leaves under it.
func TestRealShapedHostlessSwitch(t *testing.T) {
	var systems []ufm.System
	var links []ufm.Link
	require.NoError(t, json.Unmarshal([]byte(realShapeSystems), &systems))
	require.NoError(t, json.Unmarshal([]byte(realShapeLinks), &links))
	var extra []ufm.System
	require.NoError(t, json.Unmarshal([]byte(`[{"guid":"506b4b03008546c0","system_guid":"506b4b03008546c0","system_name":"MF0;DC-SW218:MSB7800/U1","type":"switch","model":"MT_2630110032","description":"MT_2630110032"}]`), &extra))
	var extraLinks []ufm.Link
	require.NoError(t, json.Unmarshal([]byte(`[
 {"source_guid":"0x506b4b03008546c0","source_port":"37","destination_guid":"0x7cfe900300f73d80","destination_port":"7"},
 {"source_guid":"0x506b4b03008546c0","source_port":"38","destination_guid":"0x7cfe900300f73fc0","destination_port":"7"}]`), &extraLinks))
	g, err := ufm.BuildGraph(append(systems, extra...), append(links, extraLinks...))
	require.NoError(t, err)
	assert.Equal(t, fabric.Stats{Switches: 5, Hosts: 3, Links: 8}, g.Stats())
	nodes := hypernodetest.Nodes(nil, "mtlx859", "mtlzfs01", "mtlx860.example.com")
	hns, err := hypernode.Build(ufm.Source, g.Groups(fabric.NodeMatcher(nodes, "")), nil)
	require.NoError(t, err)
	assert.Equal(t, `2 spine spine-248a07030077c3b0: leaf-506b4b0300854600 leaf-506b4b0300854680
1 leaf leaf-506b4b0300854600: mtlx859
1 leaf leaf-506b4b0300854680: mtlx860.example.com mtlzfs01
`, hypernodetest.Render(hns))
}
