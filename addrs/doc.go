// Package addrs is the one spelling of bottlefile's object addresses: the
// names the state, plan files, engine labels and command lines use for
// agents, the objects they own, snapshots and runtimes.
//
//	agent.NAME                      an agent's workload
//	agent.NAME.network              its network
//	agent.NAME.image                the image its build block makes
//	agent.NAME.gateway              its egress gateway
//	agent.NAME.sidecar.S            one of its sidecars
//	agent.NAME.sidecar.S.image      the image a sidecar's build block makes
//	agent.NAME.snapshot.N           a policy snapshot, N counting from 1
//	snapshot.NAME                   a snapshot block
//	runtime.NAME                    a runtime block
//	runtime.NAME.egress             a runtime's managed egress network
//
// An agent or snapshot block with for_each or count has instances: its
// NAME above is then an instance name, NAME["KEY"] (for_each) or NAME[N]
// (count), as in agent.coder["frontend"].sidecar.git or agent.coder[0].
// Keys are letters, digits, '_' and '-' (InstanceKey, CheckStringKey), so
// an address never holds a '.' inside a label. Engines get SafeName, which
// spells the instance name with letters, digits, '_' and '-' only.
//
// An Addr is comparable and its String is exactly the text above, so
// Parse(s).String() == s for every address Parse accepts, and the textual
// form of state, plans and labels does not depend on this package's types.
//
// The package is a leaf: it imports only the standard library, so any
// bottlefile package may use it.
package addrs
