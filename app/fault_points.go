package app

// faultPoint names a place of a reconcile where the acceptance tests inject a failure.
type faultPoint string

const (
	// faultRecover is the start of a recovery, before anything is read.
	faultRecover faultPoint = "recover"
	// faultCommitted is right after the commit point of a hand-off, before the decision.
	faultCommitted faultPoint = "committed"
)
