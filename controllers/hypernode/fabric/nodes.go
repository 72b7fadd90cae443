package fabric

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NodeMatcher maps a fabric host to its Kubernetes Node. By default a host matches the Node whose
// name (or kubernetes.io/hostname label) equals the host name, case-insensitively, with or without a
// domain. With a label key, a host matches the Node whose value of that label is the host name or
// the host's GUID (with or without 0x).
func NodeMatcher(nodes []*corev1.Node, label string) func(*Device) (string, bool) {
	index := make(map[string]string, 2*len(nodes))
	put := func(key, node string) {
		key = strings.ToLower(strings.TrimSpace(key))
		if key == "" {
			return
		}
		if _, ok := index[key]; !ok {
			index[key] = node
		}
	}
	for _, n := range nodes {
		if label != "" {
			v, ok := n.Labels[label]
			if !ok {
				continue
			}
			put(v, n.Name)
			if g, err := NormalizeGUID(v); err == nil {
				put(g, n.Name)
			}
			continue
		}
		put(n.Name, n.Name)
		put(short(n.Name), n.Name)
		if h := n.Labels[corev1.LabelHostname]; h != "" {
			put(h, n.Name)
			put(short(h), n.Name)
		}
	}
	return func(d *Device) (string, bool) {
		if d == nil {
			return "", false
		}
		for _, k := range append([]string{d.Name, short(d.Name), d.GUID}, d.Aliases...) {
			if n, ok := index[strings.ToLower(k)]; ok && k != "" {
				return n, true
			}
		}
		return "", false
	}
}

// short is a host name without its domain.
func short(h string) string {
	if i := strings.IndexByte(h, '.'); i > 0 {
		return h[:i]
	}
	return h
}
