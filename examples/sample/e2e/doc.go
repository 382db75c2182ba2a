// Package e2e holds the sample cluster's end-to-end test: it builds the
// sample binary and runs a whole cluster (three kv members, two api
// members and the load balancer) as real processes, then restarts an
// api member and the kv leader the way an upgrade would while clients
// write through the balancer, and checks that no request failed and no
// acknowledged write was lost. It is the proof that the sample is a fit
// target for ferry's rolling upgrades; it has no code of its own.
package e2e
