package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// choice is one step the scheduler may take, with its weight.
type choice struct {
	weight int
	action
}

// Step takes one random step: an adversary's move (drawn from its own stream, so that a run
// without recovery sees the same moves at the same steps), or a replica's pending request
// (served, or a crash with it applied or not), a replica starting a reconcile, one of Eno's
// steps, or an eno-reconciler restart. Every cache first moves forward by a random amount,
// never more than Stale writes behind.
func (w *World) Step() {
	w.catchUp()
	if n := len(w.opts.Adversaries); n > 0 && w.advRng.IntN(adversaryOdds) == 0 {
		adv := w.opts.Adversaries[w.advRng.IntN(n)]
		if what, ok := adv.Act(w); ok {
			w.logf("adversary %s: %s", adv.Name, what)
		}
		w.endStep()
		return
	}
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
	w.endStep()
}

// adversaryOdds: one step in adversaryOdds is an adversary's.
const adversaryOdds = 25

func (w *World) endStep() {
	w.clock.Advance(time.Second)
	w.states[w.fingerprint()] = true
}

// fingerprint is the world's state without times and resourceVersions: every object's
// identity, labels, annotations, spec, data and status (folded in as each is written), and
// where each replica stands.
func (w *World) fingerprint() uint64 {
	h := fnv.New64a()
	w.truth.mu.Lock()
	fmt.Fprintf(h, "%x|", w.truth.state)
	w.truth.mu.Unlock()
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

// Run explores one schedule: steps random steps, then a drain. It returns the world with the
// oracle's verdicts on every deletion.
func Run(opts Options, steps int) (*World, error) {
	w, err := New(opts)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	for range steps {
		w.Step()
	}
	w.Drain(4)
	w.oracle.Finish()
	return w, nil
}

// Outcome is one schedule run twice, with and without recovery, and what the oracle found.
type Outcome struct {
	Recovery, Plain *World
	// Violations are wrong deletions, objects gone only with recovery that are no true
	// orphans, and true orphans left in both runs with no true reason.
	Violations []Violation
}

// Differential runs the schedule of seed with recovery and again without it (same seed, same
// adversaries at the same steps), and compares the downstream clusters at the end: whatever
// only the recovery run lost must be a true orphan (safety), and every true orphan both runs
// kept must carry a true reason the product reported (liveness).
func Differential(seed uint64, steps int) (Outcome, error) {
	rec, err := Run(RandomOptions(seed), steps)
	if err != nil {
		return Outcome{}, err
	}
	plainOpts := RandomOptions(seed)
	plainOpts.NoRecovery = true
	plain, err := Run(plainOpts, steps)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Recovery: rec, Plain: plain, Violations: rec.oracle.Violations()}
	for _, v := range plain.oracle.Violations() {
		v.Rule = "without recovery: " + v.Rule
		out.Violations = append(out.Violations, v)
	}
	out.Violations = append(out.Violations, rec.oracle.OnlyWithRecovery(plain)...)
	out.Violations = append(out.Violations, rec.oracle.Leftovers(func(ref enomodel.Ref) bool { return plain.truth.uidOf(ref) != "" })...)
	rec.findings = out.Violations
	return out, nil
}

// Composition is the story's Composition.
func (w *World) Composition() domain.CompositionRef { return w.ref }

// RandomOptions draws a schedule's configuration from its seed: the story, how stale the caches
// may be, whether replicas crash, and which adversaries (none to three) act.
func RandomOptions(seed uint64) Options {
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	opts := Options{Seed: seed, Stale: rng.IntN(5), Crashes: rng.IntN(2) == 0, Replicas: 1 + rng.IntN(2)}
	all := Adversaries()
	switch n := rng.IntN(20); {
	case n < 3:
		opts.Story = bareStory()
	case n < 7:
		// An old Namespace holding only orphans: an operator approves what is held, and a later
		// synthesis may deploy into it.
		opts.Story = cascadeStory()
		opts.Adversaries = append(opts.Adversaries, all["approve-review"](), all["deploy-into-namespace"]())
	case n < 10:
		opts.Story = DefaultStory()
		opts.Story.BeforeDeletion = comanagedBeforeHistory(n%2 == 0)
	case n < 12:
		opts.Story = DefaultStory()
		opts.Story.BeforeRecreation = movedAndLeft
	default:
		opts.Story = DefaultStory()
	}
	opts.Story.NewDeletes = rng.IntN(2) == 0
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	for range rng.IntN(4) {
		opts.Adversaries = append(opts.Adversaries, all[names[rng.IntN(len(names))]]())
	}
	return opts
}
