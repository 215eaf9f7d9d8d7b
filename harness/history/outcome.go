package history

// Main is the cluster the outcome is about: the largest one the nodes report.
func (o *Observation) Main() Cluster {
	if cs := o.Clusters(); len(cs) > 0 {
		return cs[0]
	}

	return Cluster{}
}
