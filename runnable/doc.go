// Package runnable is the tombstone recovery controller as a guest of a controller-runtime
// manager: SetupWithManager adds it to eno-reconciler's manager (design §8.2) or to the
// standalone binary's, which `run` builds with ctrl.NewManager. What it adds runs on the
// manager's leader only and never returns an error to it. Only cmd imports it; its wiring is
// described in ARCHITECTURE.md, "The process plumbing".
package runnable
