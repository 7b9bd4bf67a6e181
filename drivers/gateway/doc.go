// Package gateway is the egress gateway as every driver that runs one
// sees it, whatever runs it (a docker container, a swarm service, a
// later driver's pod): the gateway object's attributes as plans show
// them, the settings it runs with (port, user, limits, where its rules
// and forbid files go), its command line for a ceiling, the proxy
// settings of what it serves, and reading its event log until it is
// ready. It reaches no engine: a driver hands it what it read.
package gateway
