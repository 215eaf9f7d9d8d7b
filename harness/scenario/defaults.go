package scenario

import "strconv"

// applyDefaults fills in what the file leaves out. It runs before validation, so that
// defaults are validated too (a default fault name can collide with an explicit one).
func (s *Scenario) applyDefaults() {
	if s.Talos == "" {
		s.Talos = DefaultProfile
	}

	// An explicit 0 is an error (validate says so), not a silent 1.
	if s.TimeScale == 0 && !s.lines.Has("timeScale") {
		s.TimeScale = 1
	}

	if s.Orchestrator.Name == "" {
		s.Orchestrator.Name = "resilient"
	}

	if s.Orchestrator.BootstrapNode == "" {
		s.Orchestrator.BootstrapNode = "cp1"
	}

	if s.Expect.Within.Duration == 0 {
		s.Expect.Within.Duration = DefaultWithin
	}

	if s.Expect.Settle.Duration == 0 {
		s.Expect.Settle.Duration = DefaultSettle
	}

	if s.Expect.Stable.Duration == 0 {
		s.Expect.Stable.Duration = DefaultStable
	}

	// The orchestrator gets the whole run unless told otherwise.
	if s.Orchestrator.Timeout.Duration == 0 {
		s.Orchestrator.Timeout = s.Expect.Within
	}

	for i := range s.Faults {
		if f := &s.Faults[i]; f.Name == "" {
			f.Name = f.Kind + "-" + strconv.Itoa(i)
		}
	}

	if s.Cluster.Workload.WritesPerSecond > 0 && s.Cluster.Workload.ValueBytes == 0 {
		s.Cluster.Workload.ValueBytes = DefaultValueBytes
	}

	for name, o := range s.Cluster.Nodes {
		if o.EtcdImagePull.Duration == 0 {
			o.EtcdImagePull.Duration = DefaultEtcdImagePull
			s.Cluster.Nodes[name] = o
		}
	}
}
