package api

import "fmt"

// UpgradeStatus is an upgrade and who drives it: the answer of GET,
// POST and DELETE /v1/upgrade and of POST /v1/upgrade/overrides.
type UpgradeStatus struct {
	Upgrade Upgrade `json:"upgrade"`
	// DrivenBy: server, other-process or none.
	DrivenBy string `json:"driven_by"`
}

// ActionResult answers PATCH /v1/upgrade: the request is recorded, and
// the process driving the upgrade acts on it at its next step.
type ActionResult struct {
	Action   string  `json:"action"`
	Upgrade  Upgrade `json:"upgrade"`
	DrivenBy string  `json:"driven_by"`
}

// StartRequest is the body of POST /v1/upgrade.
type StartRequest struct {
	APIVersion string `json:"api_version,omitempty"`
	To         string `json:"to"`
	// Traffic runs the description's traffic around the upgrade: the
	// baseline first (the request returns after it), each batch judged,
	// the report at the end (GET /v1/upgrade/report).
	Traffic bool `json:"traffic,omitempty"`
	// AcceptDowntime begins an upgrade that cannot be zero-downtime (a
	// component of strategy offline); without it such an upgrade is
	// refused, saying why.
	AcceptDowntime bool `json:"accept_downtime,omitempty"`
}

// ActionRequest is the body of PATCH /v1/upgrade.
type ActionRequest struct {
	APIVersion string `json:"api_version,omitempty"`
	Action     string `json:"action"` // pause, resume, abort, finalize
}

// OverrideRequest is the body of POST /v1/upgrade/overrides: one
// admission predicate switched off (for one member, one component's
// members, the phase in progress, for a while), one effect's undo given
// up, or one of these withdrawn (Revoke).
type OverrideRequest struct {
	APIVersion string `json:"api_version,omitempty"`
	Predicate  string `json:"predicate,omitempty"`
	Member     string `json:"member,omitempty"`
	Effect     string `json:"effect,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// By is read and ignored: who made the override is the name of the
	// request's token, as the server authenticated it. Clients written
	// before named tokens send it, and must not be refused for it.
	By        string `json:"by,omitempty"`
	Component string `json:"component,omitempty"`
	ThisPhase bool   `json:"this_phase,omitempty"`
	// For makes it expire ("30m"); Revoke withdraws the override in
	// force with the same scope.
	For    string `json:"for,omitempty"`
	Revoke bool   `json:"revoke,omitempty"`
}

// CheckVersion says why a request naming API version v cannot be
// served, or "" if it can: "" (a client before the field) or
// APIVersion.
func CheckVersion(v string) string {
	if v == "" || v == APIVersion {
		return ""
	}
	return fmt.Sprintf("api_version %q is not one this server speaks: %s", v, APIVersion)
}
