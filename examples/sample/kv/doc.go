// Package kv is the storage tier of ferry's sample cluster: a small
// replicated key-value store on hashicorp/raft, durable on disk
// (raft-boltdb log and stable store, file snapshots), with an HTTP API
// that tells leaders from followers (421 with a leader hint), reports
// readiness and quorum, and moves leadership on request or on SIGTERM.
// It exists so that ferry's demo has a real quorum system to upgrade one
// member at a time: a member restarted on a new binary must rejoin with
// its data, and the cluster must keep a majority throughout.
package kv
