// Package lb is the load balancer in front of ferry's sample cluster:
// it spreads HTTP requests round robin over the api members that are
// enabled and pass active health checks, retries a request on the next
// member when one fails without answering (or answers 502/503), and has
// an admin API to drain a member (out of rotation, then wait for its
// in-flight requests) and enable it again. Those are the two hooks an
// upgrade needs to restart a stateless member without a client seeing
// an error. A host's maintenance mode takes every backend on a host out
// of rotation at once and back (POST /admin/hosts/{host}/lock and
// unlock), and GET /admin/hosts/{host}/capacity?min=N says whether the
// backends left would be enough: what an orchestrator that locks hosts
// (StarlingX's host-lock) needs.
package lb
