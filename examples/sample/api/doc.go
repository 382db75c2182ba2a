// Package api is the stateless API tier of ferry's sample cluster: it
// takes client reads and writes on /v1/kv/{key} and forwards them to
// the kv leader, finding the leader itself and retrying across leader
// changes (421 hints, 503s, refused connections) for up to five
// seconds. That retry is what makes a kv member's restart invisible to
// clients, and because the tier holds no state, its own members can be
// drained and restarted behind the load balancer at will.
package api
