package history

import "time"

// names are the node names in order.
func (h History) names() []string {
	out := make([]string, len(h.Nodes))
	for i, n := range h.Nodes {
		out[i] = n.Name
	}

	return out
}

// Walk goes through the entries in order with the cluster as it was then: cur
// holds every node's last recorded state (a node not seen yet is absent). fn
// must not keep cur: it changes as the walk goes on.
func (h History) Walk(fn func(e Entry, cur *Observation)) {
	cur := NewObservation(0, h.names())

	for _, e := range h.Entries {
		if e.Observed != nil {
			cur.Nodes[e.Node] = e.Observed
		}

		cur.At = e.At()
		cur.Wall = h.wall(cur.At)
		fn(e, cur)
	}
}

// Final is the last look at every node: the entries marked final (the run's
// closing poll), or each node's last recorded state when there are none.
func (h History) Final() *Observation {
	last := NewObservation(0, h.names())
	final := NewObservation(0, h.names())

	for _, e := range h.Entries {
		if e.Observed == nil {
			continue
		}

		last.Nodes[e.Node] = e.Observed
		last.At = max(last.At, e.At())

		if e.Final {
			final.Nodes[e.Node] = e.Observed
			final.At = max(final.At, e.At())
		}
	}

	if len(final.Nodes) > 0 {
		last = final
	}

	last.Wall = h.wall(last.At)

	return last
}

// wall is the local clock time at an offset (zero when Start is not known).
func (h History) wall(at time.Duration) time.Time {
	if h.Start.IsZero() {
		return time.Time{}
	}

	return h.Start.Add(at)
}

// End is the offset of the last entry.
func (h History) End() time.Duration {
	if len(h.Entries) == 0 {
		return 0
	}

	return h.Entries[len(h.Entries)-1].At()
}
