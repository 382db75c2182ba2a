// Package coord is the sample cluster's coordinator: an active/standby
// pair (StarlingX's controllers, cephadm's managers, PD's timestamp
// oracle) in which one member holds a lease, the active role, and
// issues stamps (increasing numbers the api members put on writes);
// the other stands by, ready to take over.
//
// The active renews its lease by heartbeats to its peer; a standby
// that hears none for a lease takes it over (a new term). An admin call
// hands the role to a named peer at once (a switchover: the standby
// takes the next term and the old active stands by), which is what an
// upgrade does before it stops the active; a member that is simply
// stopped hands nothing over, and its clients wait out the lease. The
// handover can be made slow (a delay before it happens) to show an
// abort in the middle of one. Each member says its role on GET /role,
// and the pair's health on GET /cluster.
//
// It imports nothing of ferry: ferry drives it through the description
// (a role check, a cluster gate, hooks.switchover), as it would drive a
// system it did not write.
package coord
