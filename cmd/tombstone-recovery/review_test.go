package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// annotateWeb sets (or, with "", removes) annotations of <ns>/web as another writer would.
func annotateWeb(t *testing.T, c kubetest.Clients, ns string, kv map[string]string) {
	t.Helper()
	ctx := testCtx(t)
	res := c.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns)
	u, err := res.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	a := u.GetAnnotations()
	for k, v := range kv {
		if v == "" {
			delete(a, k)
		} else {
			a[k] = v
		}
	}
	u.SetAnnotations(a)
	_, err = res.Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func webAnnotations(t *testing.T, c kubetest.Clients, ns string) map[string]string {
	t.Helper()
	u, err := c.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).Get(testCtx(t), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return u.GetAnnotations()
}

// heldFixture is the recreated fixture with its recovery held for review, as the controller
// decides it under a guard of 0.3.
func heldFixture(t *testing.T, c kubetest.Clients) recreated {
	t.Helper()
	r := recreatedComposition(t, c, uniqueLineage("review"))
	annotateWeb(t, c, r.ns, map[string]string{domain.AnnotationDecision: domain.Decision{SynthesisUUID: r.nowUUID,
		Outcome: domain.OutcomeHeldForReview, Reason: domain.ReasonOverDeletionGuard, Message: "2 of 5 resources would be deleted, over the guard of 0.3"}.Encode()})
	return r
}

// review runs approve or reject with in as the operator's answer.
func review(t *testing.T, in string, args ...string) (string, error) {
	t.Helper()
	return reviewWith(t, strings.NewReader(in), args...)
}

func reviewWith(t *testing.T, in interface{ Read([]byte) (int, error) }, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := reviewer{inspector{now: time.Now}, in}.run(testCtx(t), args[0], args[1:], &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestApproveShowsThePlanAsksAndWrites(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := heldFixture(t, c)
	admin := kubeconfigOf(t, "")

	// The name may follow the flags; the plan is shown with the controller's guard.
	out, err := review(t, "yes\n", "approve", "--kubeconfig", admin, "--max-tombstone-fraction", "0.3", r.ns+"/web")
	t.Log("\n" + out)
	require.NoError(t, err)
	hasLine(t, out, `^HELD FOR REVIEW \(2\)$`)
	hasLine(t, out, `^ConfigMap\s+v1\s+team-a\s+web-feature-flags$`)
	hasLine(t, out, `^CronJob\s+batch/v1\s+team-a\s+web-cleanup$`)
	hasLine(t, out, `^Held: 2 of 5 resources would be deleted, over the guard of 0.3$`)
	hasLine(t, out, `^Setting eno.azure.io/tombstone-recovery-review=approve:`+r.nowUUID+` on `+r.ns+`/web; the controller then re-plans`)
	hasLine(t, out, `Type yes to go on: Written. Follow the decision: kubectl get composition web -n `+r.ns)
	assert.Equal(t, "approve:"+r.nowUUID, webAnnotations(t, c, r.ns)[domain.AnnotationReview])

	// Answered once: a second review of the same synthesis is refused.
	_, err = review(t, "", "reject", r.ns+"/web", "--kubeconfig", admin, "--yes")
	require.ErrorContains(t, err, "reject: composition "+r.ns+"/web: synthesis "+r.nowUUID+" is already reviewed (eno.azure.io/tombstone-recovery-review=approve:"+r.nowUUID+")")
	assert.Equal(t, "approve:"+r.nowUUID, webAnnotations(t, c, r.ns)[domain.AnnotationReview])
}

func TestRejectWithYesDoesNotAsk(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := heldFixture(t, c)
	out, err := review(t, "", "reject", r.ns+"/web", "--kubeconfig", kubeconfigOf(t, ""), "--yes")
	require.NoError(t, err, out)
	assert.NotContains(t, out, "Type yes")
	hasLine(t, out, `the controller then decides NothingToRecover \(Rejected\): nothing is deleted\.$`)
	assert.Equal(t, "reject:"+r.nowUUID, webAnnotations(t, c, r.ns)[domain.AnnotationReview])
}

func TestReviewWritesNothingUnlessConfirmed(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := heldFixture(t, c)
	for _, answer := range []string{"", "no\n", "y\n", "YES please\n"} {
		_, err := review(t, answer, "approve", r.ns+"/web", "--kubeconfig", kubeconfigOf(t, ""))
		require.EqualError(t, err, "approve: not confirmed; nothing written", "answer %q", answer)
		assert.NotContains(t, webAnnotations(t, c, r.ns), domain.AnnotationReview)
	}
}

// changeWhileAsked answers yes after another writer changed the Composition.
type changeWhileAsked struct {
	t    *testing.T
	c    kubetest.Clients
	ns   string
	done bool
}

func (a *changeWhileAsked) Read(p []byte) (int, error) {
	if !a.done {
		a.done = true
		annotateWeb(a.t, a.c, a.ns, map[string]string{"example.com/touched": "yes"})
	}
	return strings.NewReader("yes\n").Read(p)
}

// The write is guarded by the resourceVersion read before the plan was shown.
func TestReviewRefusesWhenTheCompositionChangedWhileAsked(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := heldFixture(t, c)
	_, err := reviewWith(t, &changeWhileAsked{t: t, c: c, ns: r.ns}, "approve", r.ns+"/web", "--kubeconfig", kubeconfigOf(t, ""))
	require.ErrorContains(t, err, "approve: composition "+r.ns+"/web changed since it was read (resourceVersion ")
	assert.Contains(t, err.Error(), "nothing written: run the command again to see the plan as it is now")
	assert.NotContains(t, webAnnotations(t, c, r.ns), domain.AnnotationReview)
}

func TestReviewRefusesWhenNothingIsHeld(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := recreatedComposition(t, c, uniqueLineage("review-none"))
	admin := kubeconfigOf(t, "")
	ref := r.ns + "/web"
	decided := func(uuid string, o domain.Outcome, reason string) string {
		return domain.Decision{SynthesisUUID: uuid, Outcome: o, Reason: reason}.Encode()
	}
	for _, tc := range []struct {
		name, decision, want string
	}{
		{"no decision", "", "approve: composition " + ref + " has no recovery held for review: it has no recovery decision"},
		{"finished", decided(r.nowUUID, domain.OutcomeNothingToRecover, domain.ReasonUnverified),
			"approve: composition " + ref + " has no recovery held for review: synthesis " + r.nowUUID + " was decided NothingToRecover Unverified"},
		{"moved on", decided(r.sourceUUID, domain.OutcomeHeldForReview, domain.ReasonOverDeletionGuard),
			"approve: composition " + ref + " has moved on: its decision (HeldForReview) is for synthesis " + r.sourceUUID + ", its current synthesis is " + r.nowUUID + "; recovery decides for that one anew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotateWeb(t, c, r.ns, map[string]string{domain.AnnotationDecision: tc.decision})
			out, err := review(t, "yes\n", "approve", ref, "--kubeconfig", admin, "--yes")
			require.EqualError(t, err, tc.want)
			assert.Empty(t, out, "nothing is shown for a refusal")
			assert.NotContains(t, webAnnotations(t, c, r.ns), domain.AnnotationReview)
		})
	}
	_, err := review(t, "", "approve", r.ns+"/gone", "--kubeconfig", admin)
	require.ErrorContains(t, err, "approve: reading composition "+r.ns+"/gone: not found")
}

func TestReviewRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"approve"}, "approve: pass one NAMESPACE/NAME, got []"},
		{[]string{"approve", "a/b", "c/d"}, `approve: pass one NAMESPACE/NAME, got ["a/b" "c/d"]`},
		{[]string{"reject", "web"}, `reject: composition "web" must be NAMESPACE/NAME`},
		{[]string{"approve", "a/b", "--max-chunks", "0"}, "approve: --max-chunks"},
		{[]string{"approve", "--nope", "a/b"}, "approve: flag provided but not defined: -nope"},
	} {
		var out, errOut bytes.Buffer
		err := dispatch(testCtx(t), tc.args, &out, &errOut)
		require.ErrorContains(t, err, tc.want, tc.args)
		assert.NotContains(t, err.Error(), "\n")
	}
	var out, errOut bytes.Buffer
	require.NoError(t, dispatch(testCtx(t), []string{"reject", "-h"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "usage: tombstone-recovery reject NAMESPACE/NAME [--yes]")
	assert.Contains(t, errOut.String(), "Exit codes: 0 written; 1 nothing written")
	assert.Contains(t, errOut.String(), "-yes")
}

// inspect --all prints the held row with the command that answers it, and exits 3.
func TestInspectAllExitsThreeWhenARowNeedsAPerson(t *testing.T) {
	c := testEnv.AdminClients(t)
	r := heldFixture(t, c)
	var out, errOut bytes.Buffer
	err := dispatch(testCtx(t), []string{"inspect", "--all", "--composition-namespace", r.ns, "--kubeconfig", kubeconfigOf(t, "")}, &out, &errOut)
	var code exitCode
	require.ErrorAs(t, err, &code)
	assert.Equal(t, exitNeedsPerson, code.code)
	assert.EqualError(t, err, "inspect: 1 of 1 Compositions need a person")
	hasLine(t, out.String(), `^NEEDS A PERSON \(1\)$`)
	hasLine(t, out.String(), `^\s+`+r.ns+`/web: recovery of synthesis `+r.nowUUID+` is held for review: tombstone-recovery approve `+r.ns+`/web \(or reject\)$`)

	// The same in JSON, for a script.
	out.Reset()
	err = dispatch(testCtx(t), []string{"inspect", "--all", "--composition-namespace", r.ns, "--kubeconfig", kubeconfigOf(t, ""), "-o", "json"}, &out, &errOut)
	require.ErrorAs(t, err, &code)
	assert.Contains(t, out.String(), `"attention": [`)
}

// run refuses an inventory namespace that does not exist; inspect and prune warn about one.
func TestANamespaceThatDoesNotExist(t *testing.T) {
	admin := kubeconfigOf(t, "")
	var out, errOut bytes.Buffer
	err := dispatch(testCtx(t), []string{"run", "--kubeconfig", admin, "--inventory-namespace", "no-such-inventory"}, &out, &errOut)
	require.EqualError(t, err, "run: --inventory-namespace no-such-inventory does not exist in the downstream cluster: create it, or pass the namespace of the inventory")

	for _, args := range [][]string{
		{"inspect", "--lineage", "nothing-here", "--remote-kubeconfig", admin, "--inventory-namespace", "no-such-inventory"},
		{"prune", "--kubeconfig", admin, "--inventory-namespace", "no-such-inventory"},
	} {
		out.Reset()
		errOut.Reset()
		_ = dispatch(testCtx(t), args, &out, &errOut)
		assert.Contains(t, errOut.String(), "warning: namespace no-such-inventory (--inventory-namespace) does not exist in the downstream cluster\n", args)
	}
	errOut.Reset()
	_ = dispatch(testCtx(t), []string{"inspect", "--all", "--composition-namespace", "no-such-team", "--kubeconfig", admin}, &out, &errOut)
	assert.Contains(t, errOut.String(), "warning: namespace no-such-team (--composition-namespace) does not exist in the control plane\n")
}
