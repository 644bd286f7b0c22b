package derivation

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	yaml "go.yaml.in/yaml/v3"
)

// flowKeys are the mappings written on one line, as people write policies
// by hand: short, and a diff of one target stays one line.
var flowKeys = map[string]bool{"for": true, "target": true, "external": true}

// Render writes the result as YAML: the notes as comments at the top, then
// the policy, each rule preceded by comments naming the patches it mirrors.
// Keys keep the API types' order (for, subjects, initializing, ...), not
// the alphabetical order a map would get.
func Render(r *Result) ([]byte, error) {
	j, err := json.Marshal(r.Policy)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot encode AllowancePolicy %s", r.Policy.GetName())
	}
	var doc yaml.Node
	// JSON is YAML: decoding it into a node keeps the struct field order.
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, errors.Wrapf(err, "cannot encode AllowancePolicy %s", r.Policy.GetName())
	}
	top := doc.Content[0]
	plain(top)
	dropKey(top, "status")
	apiVersionFirst(top)
	if md := value(top, "metadata"); md != nil {
		dropKey(md, "creationTimestamp")
	}
	style(top)
	if spec := value(top, "spec"); spec != nil {
		if rs := value(spec, "rules"); rs != nil {
			for i, n := range rs.Content {
				if i < len(r.Comments) {
					n.HeadComment = strings.Join(r.Comments[i], "\n")
				}
			}
		}
	}
	if len(r.Notes) > 0 {
		top.HeadComment = "Notes:\n" + strings.Join(prefixed("- ", r.Notes), "\n")
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(&doc); err != nil {
		return nil, errors.Wrapf(err, "cannot encode AllowancePolicy %s", r.Policy.GetName())
	}
	return b.Bytes(), enc.Close()
}

// plain clears the flow style and quoting every node has from JSON.
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

// apiVersionFirst moves apiVersion before kind, as manifests are written;
// TypeMeta encodes kind first.
func apiVersionFirst(m *yaml.Node) {
	for i := 2; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "apiVersion" {
			kv := []*yaml.Node{m.Content[i], m.Content[i+1]}
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			m.Content = append(kv, m.Content...)
			return
		}
	}
}

func prefixed(p string, ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = p + l
	}
	return out
}

// style makes short mappings and scalar lists flow style.
func style(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if flowKeys[k.Value] && v.Kind == yaml.MappingNode {
				v.Style = yaml.FlowStyle
			}
			style(k)
			style(v)
		}
		if n.Style != yaml.FlowStyle && len(n.Content) <= 8 && scalars(n) {
			// subjects, mutation bounds: a line each.
			n.Style = yaml.FlowStyle
		}
	case yaml.SequenceNode:
		if scalars(n) {
			n.Style = yaml.FlowStyle
		}
		for _, c := range n.Content {
			style(c)
		}
	}
}

// scalars reports whether every value below n is a scalar or a flow
// sequence of scalars.
func scalars(n *yaml.Node) bool {
	for _, c := range n.Content {
		switch c.Kind {
		case yaml.ScalarNode:
		case yaml.SequenceNode:
			if !scalars(c) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func dropKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
