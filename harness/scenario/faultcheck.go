package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FaultCheck is what a fault kind's Validate sees: the scenario around the
// fault, and helpers that report problems at the fault's fields (named relative
// to the fault: "port", "nodes[1]").
type FaultCheck struct {
	v *validator
	f *Fault
}

// Scenario is the scenario the fault belongs to (defaults applied).
func (c *FaultCheck) Scenario() *Scenario { return c.v.s }

// Errorf reports a problem with one of the fault's fields.
func (c *FaultCheck) Errorf(field, format string, args ...any) {
	c.v.errs = append(c.v.errs, c.f.Errorf(c.v.s, field, format, args...))
}

// Has reports whether the fault's field was written in the file.
func (c *FaultCheck) Has(field string) bool {
	return c.v.s.lines.Has(fmt.Sprintf("faults[%d].%s", c.f.Index, field))
}

// Node checks a required node name: a node of the cluster, or RandomNode where
// random is allowed (the seed then picks a control plane other than the
// bootstrap node).
func (c *FaultCheck) Node(field, name string, random bool) {
	switch {
	case name == "":
		c.Errorf(field, "required: a node name%s", map[bool]string{true: " or " + RandomNode}[random])
	case name == RandomNode && random:
		if len(c.v.nodes) > 0 && len(c.v.controlPlanes()) < 2 {
			c.Errorf(field, "%s picks a control plane other than the bootstrap node, and there is none", RandomNode)
		}
	case c.v.nodes != nil && !slices.Contains(c.v.nodes, name):
		c.Errorf(field, "unknown node %q: one of %s", name, strings.Join(c.v.nodes, ", "))
	}
}

// ControlPlane checks a required node name that must be a control plane (or
// RandomNode, which always picks one); why says what needs one ("crash-etcd
// acts on etcd").
func (c *FaultCheck) ControlPlane(field, name, why string) {
	c.Node(field, name, true)

	if name != "" && name != RandomNode && slices.Contains(c.v.nodes, name) && !IsControlPlane(name) {
		c.Errorf(field, "%q is a worker, which runs no etcd: %s needs a control plane, one of %s", name, why, strings.Join(c.v.controlPlanes(), ", "))
	}
}

// OneOf checks a required value against the allowed ones.
func (c *FaultCheck) OneOf(field, value, what string, allowed []string) bool {
	if value == "" {
		c.Errorf(field, "required: one of %s", strings.Join(allowed, ", "))

		return false
	}

	if !slices.Contains(allowed, value) {
		c.Errorf(field, "unknown %s %q: one of %s", what, value, strings.Join(allowed, ", "))

		return false
	}

	return true
}

// Int checks lo <= n <= hi.
func (c *FaultCheck) Int(field string, n, lo, hi int64) {
	if n < lo || n > hi {
		c.Errorf(field, "must be between %d and %d, got %d", lo, hi, n)
	}
}

// Duration checks lo <= d <= hi (a zero lo: positive is not required).
func (c *FaultCheck) Duration(field string, d Duration, lo, hi time.Duration) {
	switch {
	case d.Duration < lo && d.Duration == 0:
		c.Errorf(field, "required: a duration between %s and %s", lo, hi)
	case d.Duration < lo || d.Duration > hi:
		c.Errorf(field, "must be between %s and %s, got %s", lo, hi, d)
	}
}
