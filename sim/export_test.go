package sim

// DialsTo is how many connections the nodes' Talos-side clients have dialled
// to addr.
func (c *Cluster) DialsTo(addr string) int {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()

	return c.net.dials[addr]
}
