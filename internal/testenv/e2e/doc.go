// Package e2e holds ferry's end-to-end safety tests: real agent, real
// sample processes (a raft key-value store, an api tier, a load
// balancer), real ferry processes killed with SIGKILL. Nothing in it
// is a fake; it has no non-test code besides this comment.
package e2e
