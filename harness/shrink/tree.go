package shrink

import (
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// The helpers below read and edit a scenario's YAML tree. Every one takes
// and returns nil for a part that is not there, so a chain of them reads a
// path without checks at every step.

// root is the document's top mapping.
func root(doc *yaml.Node) *yaml.Node {
	if doc == nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}

	return mapping(doc.Content[0])
}

// mapping is n if it is a mapping.
func mapping(n *yaml.Node) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}

	return n
}

// get is the value of key in mapping m.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil {
		return nil
	}

	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}

	return nil
}

// seq is the sequence at key of mapping m.
func seq(m *yaml.Node, key string) *yaml.Node {
	if n := get(m, key); n != nil && n.Kind == yaml.SequenceNode {
		return n
	}

	return nil
}

// items are the entries of sequence n.
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}

	return n.Content
}

// scalar is n's value if it is a scalar.
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}

	return n.Value
}

// del removes key from mapping m, reporting whether it was there.
func del(m *yaml.Node, key string) bool {
	if m == nil {
		return false
	}

	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)

			return true
		}
	}

	return false
}

// setScalar sets key of mapping m to a scalar, reporting whether it could.
func setScalar(m *yaml.Node, key, value, tag string) bool {
	n := get(m, key)
	if n == nil || n.Kind != yaml.ScalarNode {
		return false
	}

	n.Value, n.Tag, n.Style = value, tag, 0

	return true
}

// intAt is the integer at key of mapping m.
func intAt(m *yaml.Node, key string) (int, bool) {
	v, err := strconv.Atoi(scalar(get(m, key)))

	return v, err == nil
}

// durationAt is the duration at path under mapping m.
func durationAt(m *yaml.Node, path []string) (time.Duration, bool) {
	for _, k := range path[:len(path)-1] {
		m = mapping(get(m, k))
	}

	d, err := time.ParseDuration(scalar(get(m, path[len(path)-1])))

	return d, err == nil
}

// clone is a deep copy of a tree.
func clone(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}

	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))

	for i, ch := range n.Content {
		c.Content[i] = clone(ch)
	}

	c.Alias = clone(n.Alias)

	return &c
}
