// Package engine is the one way bottlefile's Docker-engine drivers (docker,
// swarm) reach an engine: the connection attributes of a runtime block, the
// check validate runs on them, the client, and errors that say what failed.
//
// A runtime block holds, besides its driver's own attributes:
//
//	host     = "unix:///var/run/docker.sock" # or tcp://HOST:PORT, ssh://USER@HOST[:PORT]; else DOCKER_HOST
//	tls_ca   = "certs/ca.pem"   # tcp:// only: the CA the engine's certificate must be signed by
//	tls_cert = "certs/cert.pem" # tcp:// only: the client certificate the engine asks for
//	tls_key  = "certs/key.pem"  # tcp:// only: its key
//
// A driver uses it in four steps:
//
//	spec := engine.Spec()                       // merge into the runtime block's schema
//	Schema.CheckRuntime = engine.Check          // validate: contacts nothing
//	ep, err := engine.FromConfig(req)           // Configure: reads the attributes (and DOCKER_HOST)
//	eng, err := ep.Open()                       // a client that has not contacted the engine
//	err = eng.Connect(ctx)                      // once, before the first call: ping, API version
//	err = eng.Endpoint().Classify(err)          // after any call: one *drivers.UnreachableError
//
// Every connection goes through this package's own dialer: unix sockets,
// TCP with TLS verified against tls_ca and the client certificate presented,
// and ssh (the ssh client running `docker system dial-stdio` on the
// engine's host, as the docker CLI does). A failure to connect is a
// *ConnectError whose Failure says what failed (refused, TLS,
// authentication, unreachable, API too old); Classify turns it, and any
// other failure to reach the engine at all, into a *drivers.UnreachableError
// naming the runtime and the address, which the planner reports once per
// runtime.
package engine
