package upgrade

// Every admission view of every upgrade test is checked against one
// built anew (admission.verify): the view kept from step to step must
// say what building it each time said.
func init() { VerifyAdmission = true }
