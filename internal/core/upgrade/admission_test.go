package upgrade

// Every admission view of every step of the simulated world (but for
// the seeds of TestSimulatedWorlds it leaves unchecked) is checked
// against one built anew (admission.verify): the view kept from step
// to step must say what building it each time said.
func (w *world) verifyAdmission() (restore func()) {
	was := VerifyAdmission
	VerifyAdmission = !w.unchecked
	return func() { VerifyAdmission = was }
}
