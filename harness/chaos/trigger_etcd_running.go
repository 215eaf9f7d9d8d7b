package chaos

// EtcdRunning is the trigger state "etcd-running": the node's etcd service is Running.
type EtcdRunning struct{ isState }

var _ = registerState(EtcdRunning{})

func (EtcdRunning) Name() string { return "etcd-running" }
func (EtcdRunning) Doc() string  { return "the node's etcd service is Running" }

func (EtcdRunning) Describe(node string, _ int) string { return node + " is etcd-running" }

func (EtcdRunning) Holds(v View, node string, _ int) bool {
	n := v.Obs.Nodes[node]

	return n.Etcd != nil && n.Etcd.State == "Running"
}
