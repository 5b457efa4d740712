package policy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// grantedByRelease is what the release files' RBAC grants the controller's identity, as
// `kubectl auth can-i --list --as=<the ServiceAccount> -n <namespace>` prints it, less what every
// authenticated user has. Each line names the step of the design that uses it; a grant that no
// step uses fails TestRBACGrantsOnlyWhatTheDesignUses.
var grantedByRelease = map[string][]string{
	// Any namespace: Compositions and slices are cluster-wide grants.
	"default": {
		"compositions.eno.azure.io get list watch",                                // the Composition cache and the live guard (§6)
		"compositions.eno.azure.io patch",                                         // §6.2 steps 1, 3, 4: arming, decision, force-resynthesis
		"compositions.eno.azure.io/status patch",                                  // §6.2 step 2: name a recovery slice
		"resourceslices.eno.azure.io get list watch",                              // §4 and §6 read the synthesis's slices; §6.3's fleet index lists and watches them
		"resourceslices.eno.azure.io create",                                      // §6.2 step 2: create a recovery slice, never updated
		"events create patch",                                                     // Events on Compositions
		"configmaps get", "services get", "serviceaccounts get", "namespaces get", // §6.3 reads each tombstone's object
		"deployments.apps get", "statefulsets.apps get", "daemonsets.apps get",
		"jobs.batch get", "cronjobs.batch get", "ingresses.networking.k8s.io get",
		"poddisruptionbudgets.policy get", "horizontalpodautoscalers.autoscaling get",
		"roles.rbac.authorization.k8s.io get", "rolebindings.rbac.authorization.k8s.io get",
		"clusterroles.rbac.authorization.k8s.io get", "clusterrolebindings.rbac.authorization.k8s.io get",
	},
	// The controller's own namespace adds the leader election Lease.
	"eno-system": {"leases.coordination.k8s.io create get update"},
	// The inventory namespace adds the inventory Secrets (§4 writes, §5 reads): the admission
	// policy narrows create and update to our own Secrets; nothing narrows the reads.
	"kube-system": {"secrets create get list update watch"},
}

// TestRBACGrantsOnlyWhatTheDesignUses asks the API server, as the controller's ServiceAccount,
// what it may do in each namespace (a SelfSubjectRulesReview, what `kubectl auth can-i --list`
// sends) and compares that with grantedByRelease: no verb on any resource beyond those.
func TestRBACGrantsOnlyWhatTheDesignUses(t *testing.T) {
	client, err := kubernetes.NewForConfig(controllerConfig())
	require.NoError(t, err)
	// What every ServiceAccount may do (system:basic-user, system:discovery, cluster trust
	// bundles) is not ours to judge: another ServiceAccount's rules are the baseline.
	anyone, err := kubernetes.NewForConfig(kubetest.Impersonating(env.AdminConfig(), "system:serviceaccount:other:nobody",
		"system:serviceaccounts", "system:serviceaccounts:other", "system:authenticated"))
	require.NoError(t, err)
	baseline := rulesOf(t, anyone, "default")
	for ns, extra := range grantedByRelease {
		t.Run(ns, func(t *testing.T) {
			want := slices.Clone(grantedByRelease["default"])
			if ns != "default" {
				want = append(want, extra...)
			}
			got := rulesOf(t, client, ns)
			got = slices.DeleteFunc(got, func(r string) bool { return slices.Contains(baseline, r) })
			assert.ElementsMatch(t, normalize(want), got, "RBAC of the controller's ServiceAccount in %s", ns)
		})
	}
	t.Run("Eno's ServiceAccount may impersonate only the controller's", enoMayImpersonateOnlyTheControllersServiceAccount)
}

// rulesOf returns the resource rules a SelfSubjectRulesReview reports in ns, one
// "resource[.group][/subresource] verbs..." line per resource, verbs sorted.
func rulesOf(t *testing.T, client kubernetes.Interface, ns string) []string {
	t.Helper()
	ctx := kubetest.Context(t, time.Minute)
	review, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.False(t, review.Status.Incomplete, "rules review incomplete: %s", review.Status.EvaluationError)
	verbs := map[string][]string{}
	for _, r := range review.Status.ResourceRules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := res
				if g != "" {
					key = resourceWithGroup(res, g)
				}
				verbs[key] = append(verbs[key], r.Verbs...)
			}
		}
	}
	return joinVerbs(verbs)
}

// joinVerbs writes one "resource verbs..." line per resource, verbs sorted and unique.
func joinVerbs(verbs map[string][]string) []string {
	var out []string
	for res, vs := range verbs {
		slices.Sort(vs)
		out = append(out, fmt.Sprintf("%s %s", res, strings.Join(slices.Compact(vs), " ")))
	}
	return out
}

// resourceWithGroup writes res of group g as kubectl does: "resource.group/subresource".
func resourceWithGroup(res, g string) string {
	name, sub, found := strings.Cut(res, "/")
	if !found {
		return name + "." + g
	}
	return name + "." + g + "/" + sub
}

// normalize merges the lines of one resource and sorts their verbs, as rulesOf reports them.
func normalize(lines []string) []string {
	verbs := map[string][]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		verbs[f[0]] = append(verbs[f[0]], f[1:]...)
	}
	return joinVerbs(verbs)
}

// The wired eno-reconciler's grant (design §6.2): Eno's ServiceAccount may impersonate the
// controller's ServiceAccount, by name, and nothing else; impersonating it yields exactly the
// controller's identity, whose RBAC TestRBACGrantsOnlyWhatTheDesignUses checks.
func enoMayImpersonateOnlyTheControllersServiceAccount(t *testing.T) {
	ctx := kubetest.Context(t, time.Minute)
	eno, err := kubernetes.NewForConfig(env.UserConfig(enoUser))
	require.NoError(t, err)
	anyone, err := kubernetes.NewForConfig(kubetest.Impersonating(env.AdminConfig(), "system:serviceaccount:other:nobody",
		"system:serviceaccounts", "system:serviceaccounts:other", "system:authenticated"))
	require.NoError(t, err)
	baseline := rulesOf(t, anyone, "default")
	for ns, want := range map[string][]string{"eno-system": {"serviceaccounts impersonate"}, "default": nil, "kube-system": nil} {
		got := slices.DeleteFunc(rulesOf(t, eno, ns), func(r string) bool { return slices.Contains(baseline, r) })
		assert.ElementsMatch(t, want, got, "RBAC of Eno's ServiceAccount in %s", ns)
	}
	review, err := eno.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "eno-system"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, r := range review.Status.ResourceRules {
		if slices.Contains(r.Verbs, "impersonate") {
			assert.Equal(t, []string{"eno-tombstone-recovery"}, r.ResourceNames, "impersonate is granted on the controller's ServiceAccount only")
		}
	}

	t.Run("impersonating the controller's ServiceAccount", func(t *testing.T) {
		as, err := kubernetes.NewForConfig(wiredConfig())
		require.NoError(t, err)
		who, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, controllerUser, who.Status.UserInfo.Username)
		assert.ElementsMatch(t, controllerGroups, who.Status.UserInfo.Groups, "the API server adds the ServiceAccount's groups")
	})
	for _, other := range []rest.ImpersonationConfig{
		{UserName: "system:serviceaccount:eno-system:other"},
		{UserName: "system:serviceaccount:kube-system:eno-tombstone-recovery"},
		{UserName: "admin"},
		{UserName: controllerUser, Groups: []string{"system:masters"}},
	} {
		t.Run(fmt.Sprintf("impersonating %+v is forbidden", other), func(t *testing.T) {
			cfg := env.UserConfig(enoUser)
			cfg.Impersonate = other
			as, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			_, err = as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "%v", err)
		})
	}
}
