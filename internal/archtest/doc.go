// Package archtest holds tests that keep the architecture honest: the dependency direction
// domain ← ports ← (app, adapters/*) ← (runnable, cmd), and the module constraints that let
// eno-reconciler import this module without changing its build (design §8.1).
package archtest
