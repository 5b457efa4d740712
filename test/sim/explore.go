package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/test/sim/enomodel"
)

// choice is one step the scheduler may take, with its weight.
type choice struct {
	weight int
	action
}

// Step takes one random step: a replica's pending request (served, or a crash with it applied
// or not), a replica starting a reconcile, one of Eno's steps, or an adversary's move. Every
// cache first moves forward by a random amount, never more than Stale writes behind.
func (w *World) Step() {
	w.catchUp()
	var choices []choice
	for _, r := range w.replicas {
		if !r.running {
			choices = append(choices, choice{2, action{"replica " + r.name + " starts a reconcile", func() bool { r.start(w.ref); return true }}})
			continue
		}
		req := r.pending.req
		choices = append(choices, choice{12, action{fmt.Sprintf("replica %s: %s", r.name, req), func() bool {
			r.step(w.verdictFor(req))
			return true
		}}})
		if w.opts.Crashes {
			choices = append(choices,
				choice{1, action{fmt.Sprintf("replica %s crashes before %s", r.name, req), func() bool { r.step(CrashBefore); return true }}},
				choice{1, action{fmt.Sprintf("replica %s crashes after %s", r.name, req), func() bool { r.step(CrashAfter); return true }}})
		}
	}
	for _, a := range w.enoActions() {
		choices = append(choices, choice{1, a})
	}
	for _, p := range w.procs {
		choices = append(choices, choice{1, action{p.Name + " restarts", func() bool { p.Restart(); return true }}})
	}
	for _, adv := range w.opts.Adversaries {
		choices = append(choices, choice{1, action{"adversary " + adv.Name, func() bool {
			what, ok := adv.Act(w)
			if ok {
				w.logf("adversary %s: %s", adv.Name, what)
			}
			return ok
		}}})
	}
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	n := w.rng.IntN(total)
	for _, c := range choices {
		if n < c.weight {
			if c.run() {
				w.logf("%s", c.name)
			}
			break
		}
		n -= c.weight
	}
	w.clock.Advance(time.Second)
	w.states[w.fingerprint()] = true
}

// fingerprint is the world's state without times and resourceVersions: every object's
// identity, labels, annotations, spec, data and status, and where each replica stands.
func (w *World) fingerprint() uint64 {
	h := fnv.New64a()
	for _, c := range []cluster{w.cp, w.ds} {
		for _, res := range c.resources {
			list, _ := c.ViewAt(c.Revision()).List(res.GroupVersionResource(), "")
			for _, u := range list {
				fmt.Fprintf(h, "%s/%s/%s %v %v %v %v %v %v|", res.Resource, u.GetNamespace(), u.GetName(), u.GetUID(), u.GetLabels(),
					u.GetAnnotations(), u.Object["spec"], u.Object["data"], stripTimes(u.Object["status"]))
			}
		}
	}
	for _, r := range w.replicas {
		if r.running {
			fmt.Fprintf(h, "%s:%s %s|", r.name, r.pending.req.Method, r.pending.req.Path)
		}
	}
	return h.Sum64()
}

// stripTimes drops the timestamps of a status, so that states differ by what happened only.
func stripTimes(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		switch k {
		case "synthesized", "reconciled", "ready":
			out[k] = x != nil
		default:
			out[k] = stripTimes(x)
		}
	}
	return out
}

// States is how many distinct states the world went through.
func (w *World) States() map[uint64]bool { return w.states }

// verdictFor is what the world's faults do to a request: a persistent server error on one
// object answers 503 every time.
func (w *World) verdictFor(req Request) Verdict {
	for _, path := range w.unavailable {
		if req.Path == path {
			return Unavailable
		}
	}
	return Proceed
}

// unreadable reports whether the world's faults answer every replica's read of ref with an
// error (persistentError).
func (w *World) unreadable(ref enomodel.Ref) bool {
	for _, path := range w.unavailable {
		if r, ok := refFromPath(path); ok && r == ref {
			return true
		}
	}
	return false
}

// Drain lets everything but the adversaries run fairly to the end: each round every replica
// reconciles to its end, then Eno settles, then the pending recheck interval passes.
func (w *World) Drain(rounds int) {
	w.logf("drain: adversaries stop")
	for range rounds {
		for _, r := range w.replicas {
			if r.running {
				r.finish()
			}
			w.freshCaches()
			r.reconcile(w.ref)
		}
		w.settle("drain: eno settles")
		w.clock.Advance(w.opts.RecheckInterval)
	}
}

// Run explores one schedule: steps random steps, then a drain. It returns the oracle's
// violations and, for a schedule without adversaries, the orphans left with no refusal.
func Run(opts Options, steps int) (w *World, violations []Violation, unfinished []string, err error) {
	w, err = New(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	defer w.Close()
	for range steps {
		w.Step()
	}
	w.Drain(4)
	if len(opts.Adversaries) == 0 {
		unfinished = w.oracle.Unfinished(context.Background())
	}
	return w, w.oracle.Violations(), unfinished, nil
}

// Composition is the story's Composition.
func (w *World) Composition() domain.CompositionRef { return w.ref }

// RandomOptions draws a schedule's configuration from its seed: how stale the caches may be,
// whether replicas crash, and which adversaries (none to two) act.
func RandomOptions(seed uint64) Options {
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	opts := Options{Seed: seed, Stale: rng.IntN(5), Crashes: rng.IntN(2) == 0, Replicas: 1 + rng.IntN(2), Story: DefaultStory()}
	opts.Story.NewDeletes = rng.IntN(2) == 0
	all := Adversaries()
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	for range rng.IntN(3) {
		opts.Adversaries = append(opts.Adversaries, all[names[rng.IntN(len(names))]]())
	}
	return opts
}
