package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

func TestBuildTopology(t *testing.T) {
	for _, n := range []int{1, 2, 4, 5, 8, 9, 16, 17, 100, 2000} {
		topo, err := buildTopology(n)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(topo.Nodes) != n {
			t.Fatalf("n=%d: got %d nodes", n, len(topo.Nodes))
		}
		if want := ceilDiv(n, nodesPerLeaf); len(topo.Leaves) != want {
			t.Errorf("n=%d: got %d leaves, want %d", n, len(topo.Leaves), want)
		}
		if want := ceilDiv(len(topo.Leaves), leavesPerSpine); len(topo.Spines) != want {
			t.Errorf("n=%d: got %d spines, want %d", n, len(topo.Spines), want)
		}

		names := map[string]bool{}
		checkName := func(kind, name string) {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Errorf("n=%d: %s name %q invalid: %v", n, kind, name, errs)
			}
			if names[kind+"/"+name] {
				t.Errorf("n=%d: duplicate %s %q", n, kind, name)
			}
			names[kind+"/"+name] = true
		}
		nodes := map[string]fakeNode{}
		for _, nd := range topo.Nodes {
			checkName("node", nd.Name)
			nodes[nd.Name] = nd
		}

		// Every node is a member of exactly one leaf, and its labels name that leaf, spine and top.
		leafOf := map[string]string{}
		for _, g := range topo.Leaves {
			checkName("hypernode", g.Name)
			if g.Tier != tierLeaf || g.Type != topologyv1alpha1.MemberTypeNode {
				t.Errorf("n=%d: leaf %s has tier %d, member type %s", n, g.Name, g.Tier, g.Type)
			}
			if len(g.Members) == 0 || len(g.Members) > nodesPerLeaf {
				t.Errorf("n=%d: leaf %s has %d members", n, g.Name, len(g.Members))
			}
			for _, m := range g.Members {
				if _, ok := nodes[m]; !ok {
					t.Errorf("n=%d: leaf %s names unknown node %s", n, g.Name, m)
				}
				if prev, dup := leafOf[m]; dup {
					t.Errorf("n=%d: node %s in leaves %s and %s", n, m, prev, g.Name)
				}
				leafOf[m] = g.Name
			}
		}
		spineOf := map[string]string{}
		for _, g := range topo.Spines {
			checkName("hypernode", g.Name)
			if g.Tier != tierSpine || g.Type != topologyv1alpha1.MemberTypeHyperNode {
				t.Errorf("n=%d: spine %s has tier %d, member type %s", n, g.Name, g.Tier, g.Type)
			}
			if len(g.Members) == 0 || len(g.Members) > leavesPerSpine {
				t.Errorf("n=%d: spine %s has %d members", n, g.Name, len(g.Members))
			}
			for _, m := range g.Members {
				if prev, dup := spineOf[m]; dup {
					t.Errorf("n=%d: leaf %s in spines %s and %s", n, m, prev, g.Name)
				}
				spineOf[m] = g.Name
			}
		}
		checkName("hypernode", topo.Top.Name)
		if topo.Top.Tier != tierTop || topo.Top.Type != topologyv1alpha1.MemberTypeHyperNode || len(topo.Top.Members) != len(topo.Spines) {
			t.Errorf("n=%d: top %+v", n, topo.Top)
		}
		for _, g := range topo.Leaves {
			if spineOf[g.Name] == "" {
				t.Errorf("n=%d: leaf %s has no spine", n, g.Name)
			}
		}
		for _, nd := range topo.Nodes {
			if leafOf[nd.Name] != nd.Leaf || spineOf[nd.Leaf] != nd.Spine || nd.Top != topo.Top.Name {
				t.Errorf("n=%d: node %+v disagrees with the tree (leaf %s, spine %s)", n, nd, leafOf[nd.Name], spineOf[nd.Leaf])
			}
		}
		if got := len(topo.groups()); got != len(topo.Leaves)+len(topo.Spines)+1 {
			t.Errorf("n=%d: groups() returned %d", n, got)
		}
	}
}

func TestBuildTopologyRejectsNoNodes(t *testing.T) {
	if _, err := buildTopology(0); err == nil {
		t.Fatal("want an error for 0 nodes")
	}
}

func TestNamesSortInOrder(t *testing.T) {
	topo, err := buildTopology(2000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(topo.Nodes); i++ {
		if topo.Nodes[i-1].Name >= topo.Nodes[i].Name {
			t.Fatalf("%s sorts after %s", topo.Nodes[i-1].Name, topo.Nodes[i].Name)
		}
	}
	if topo.Nodes[0].Name != "kwok-node-0000" || topo.Leaves[0].Name != "leaf-000" || topo.Spines[0].Name != "spine-000" {
		t.Errorf("unexpected names %s %s %s", topo.Nodes[0].Name, topo.Leaves[0].Name, topo.Spines[0].Name)
	}
}

func TestObjects(t *testing.T) {
	topo, err := buildTopology(5)
	if err != nil {
		t.Fatal(err)
	}
	node := nodeObject(topo.Nodes[4])
	if node.Annotations[kwokNodeAnnotation] != kwokNodeValue || node.Labels[kwokNodeLabel] != kwokNodeLabelValue {
		t.Errorf("node lacks kwok markers: %v %v", node.Annotations, node.Labels)
	}
	if node.Labels[labelLeaf] != "leaf-1" || node.Labels[labelSpine] != "spine-0" {
		t.Errorf("node topology labels: %v", node.Labels)
	}
	if q := node.Status.Allocatable[gpuResource]; q.Value() != 8 {
		t.Errorf("gpu allocatable %s", q.String())
	}
	if q := node.Status.Capacity[corev1.ResourcePods]; q.Value() != 110 {
		t.Errorf("pods capacity %s", q.String())
	}

	leaf := hyperNodeObject(topo.Leaves[1])
	if leaf.Spec.Tier != 1 || len(leaf.Spec.Members) != 1 || leaf.Spec.Members[0].Selector.ExactMatch.Name != "kwok-node-4" ||
		leaf.Spec.Members[0].Type != topologyv1alpha1.MemberTypeNode {
		t.Errorf("leaf HyperNode: %+v", leaf.Spec)
	}
	top := hyperNodeObject(topo.Top)
	if top.Spec.Tier != 3 || len(top.Spec.Members) != 1 || top.Spec.Members[0].Type != topologyv1alpha1.MemberTypeHyperNode ||
		top.Spec.Members[0].Selector.ExactMatch.Name != "spine-0" {
		t.Errorf("top HyperNode: %+v", top.Spec)
	}
}
