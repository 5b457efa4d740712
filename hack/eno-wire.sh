#!/usr/bin/env bash
# Builds stock eno-reconciler with the tombstone recovery controller wired in (design §8.2), and
# proves that importing this module changes no version of any module Eno already required.
#
# Usage:
#   hack/eno-wire.sh SRC_DIR OUT_BINARY [FAULTS_BINARY]
#       SRC_DIR is an unpacked stock Eno source tree; it is copied, never modified. In the copy:
#       1. `GOWORK=off go list -m all` (the module versions before);
#       2. cmd/eno-reconciler/main.go gets tombstonerecovery.SetupWithManager(mgr, ...) after
#          reconciliation.New's error check and before mgr.Start, and the import (--patch);
#       3. go.mod gets `require github.com/Azure/eno-tombstone-recovery v0.0.0` and a replace by this
#          checkout (go mod edit), resolved with `GOWORK=off go mod tidy`;
#       4. `GOWORK=off go list -m all` again: any module of step 1 at another version, or gone, fails
#          the run, and so does a changed go or toolchain line (--compare);
#       5. `GOWORK=off go build -o OUT_BINARY ./cmd/eno-reconciler`.
#       6. with FAULTS_BINARY, the same build with `-tags tombstonerecovery_faults` to that path: the
#          acceptance tests' build, in which environment variables inject panics and crashes
#          (app/fault_injection.go). OUT_BINARY never has them.
#   hack/eno-wire.sh --patch MAIN_GO
#       Step 2 alone, in place. Fails, changing nothing, unless each anchor is found exactly once.
#   hack/eno-wire.sh --compare BEFORE AFTER
#       Step 4 alone, on two saved `go list -m all` outputs.
#
# Eno builds with GOWORK=off: its go.work names a module the proxy refuses. Progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="github.com/Azure/eno-tombstone-recovery"

log() { echo "eno-wire: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# The call inserted into cmd/eno-reconciler/main.go. In scope there (Eno v0.2.17): mgr (a
# controller-runtime Manager), remoteConfig (the downstream *rest.Config), compositionNamespace,
# mgrOpts.CompositionSelector (labels.Selector), resourceFilter (string), logger (logr.Logger), fmt and os.
read -r -d '' call <<'EOF' || true
	// Tombstone recovery (github.com/Azure/eno-tombstone-recovery): records each Composition's
	// inventory and recovers it when the Composition is recreated. A guest of this manager: it
	// runs on the elected leader only, shares the metrics registry, and no failure of its own
	// stops or delays eno-reconciler.
	tombstoneRecovery := tombstonerecovery.DefaultOptions()
	tombstoneRecovery.Enabled = true
	tombstoneRecovery.Scope.Namespace = compositionNamespace
	tombstoneRecovery.CompositionSelector = mgrOpts.CompositionSelector
	// Its --resource-filter ("" without): a tombstone it would not load is kept. Reconcilers
	// sharing one selector share one leader: ENO_TOMBSTONE_RECOVERY_ENO_RESOURCE_FILTERS lists all.
	tombstoneRecovery.ResourceFilters = []string{resourceFilter}
	tombstoneRecovery.Logger = logger.WithName("tombstone-recovery")
	tombstoneRecovery.Registerer = ctrlmetrics.Registry
	tombstoneRecovery.Getenv = os.Getenv // ENO_TOMBSTONE_RECOVERY_* override the settings
	// With --leader-election the manager starts it on its leader only; without, it logs
	// that it needs --leader-election and does not start (design §8.2).
	tombstoneRecovery.HostElects = mgrOpts.LeaderElection
	// Its clients act as the release's ServiceAccount, which the release's RBAC and admission
	// policies confine; Eno's identity may impersonate only that one (deploy/control-plane/release.yaml).
	tombstoneRecovery.Impersonate = tombstonerecovery.ReleaseServiceAccount
	if _, err := tombstonerecovery.SetupWithManager(mgr, remoteConfig, tombstoneRecovery); err != nil {
		return fmt.Errorf("adding the tombstone recovery controller: %w", err)
	}

EOF
imports="import (
	ctrlmetrics \"sigs.k8s.io/controller-runtime/pkg/metrics\"

	tombstonerecovery \"$module/runnable\"
)"

# patch inserts the call and the import into main.go, in place, or fails without writing.
patch() {
	local main="$1"
	[[ -f "$main" ]] || die "$main: no such file"
	local out
	out="$(mktemp)"
	# Anchors: the import block's end; `err = reconciliation.New(` and the `}` that closes its
	# error check (one tab); `return mgr.Start(ctx)` after that. Each exactly once, in that order.
	if ! CALL="$call" IMPORTS="$imports" awk '
		function fail(msg) { print "eno-wire: " FILENAME ": " msg > "/dev/stderr"; bad = 1; exit 1 }
		BEGIN { state = "imports" }
		{
			line = $0
			if (line ~ /tombstonerecovery/) fail("already wired (it mentions tombstonerecovery)")
			if (line ~ /reconciliation\.New\(/) nrec++
			if (line ~ /^\treturn mgr\.Start\(ctx\)$/) nstart++
		}
		state == "imports" && line == "import (" { state = "in-imports"; print; next }
		state == "in-imports" && line == ")" { print; print ""; print ENVIRON["IMPORTS"]; state = "seek-rec"; next }
		state == "seek-rec" && line ~ /^\terr = reconciliation\.New\(mgr, recOpts\)$/ { state = "seek-if"; print; next }
		state == "seek-if" {
			if (line !~ /^\tif err != nil \{$/) fail("the line after reconciliation.New is not its error check: " line)
			state = "seek-close"; print; next
		}
		state == "seek-close" && line == "\t}" { print; print ""; printf "%s\n", ENVIRON["CALL"]; state = "seek-start"; next }
		state == "seek-start" && line ~ /^\treturn mgr\.Start\(ctx\)$/ { state = "done" }
		{ print }
		END {
			if (bad) exit 1
			if (nrec != 1) { print "eno-wire: " FILENAME ": expected one reconciliation.New( call, found " nrec+0 > "/dev/stderr"; exit 1 }
			if (nstart != 1) { print "eno-wire: " FILENAME ": expected one \"return mgr.Start(ctx)\", found " nstart+0 > "/dev/stderr"; exit 1 }
			if (state != "done") {
				print "eno-wire: " FILENAME ": anchor not found (stopped looking for: " state "); is this Eno v0.2.17'"'"'s cmd/eno-reconciler/main.go?" > "/dev/stderr"
				exit 1
			}
		}
	' "$main" >"$out"; then
		rm -f "$out"
		die "not patching $main (reason above); nothing was changed"
	fi
	if ! gofmt -l "$out" >/dev/null; then
		rm -f "$out"
		die "the patched $main does not parse"
	fi
	gofmt "$out" >"$main"
	rm -f "$out"
	log "patched $main"
}

# compare fails, listing them, when a module of BEFORE is at another version in AFTER or gone.
# Lines are `go list -m all` output: "path version [=> replacement...]"; the first is the main
# module (no version). Modules only in AFTER are what this module adds; they are listed.
compare() {
	local before="$1" after="$2"
	[[ -f "$before" && -f "$after" ]] || die "--compare needs two files of 'go list -m all' output"
	awk '
		FNR == 1 { file++ }
		NF < 2 { next } # the main module
		{ v = $2; for (i = 3; i <= NF; i++) v = v " " $i }
		file == 1 { before[$1] = v; order[++n] = $1; next }
		{ after[$1] = v; aorder[++m] = $1 }
		END {
			changed = 0
			for (i = 1; i <= n; i++) {
				p = order[i]
				if (!(p in after)) { print "eno-wire:   " p " " before[p] " -> (gone)" > "/dev/stderr"; changed++ }
				else if (after[p] != before[p]) { print "eno-wire:   " p " " before[p] " -> " after[p] > "/dev/stderr"; changed++ }
			}
			added = 0
			for (i = 1; i <= m; i++) if (!(aorder[i] in before)) { added++; list = list "\n  " aorder[i] " " after[aorder[i]] }
			if (changed) {
				print "eno-wire: FAIL: importing " ENVIRON["MODULE"] " changes " changed " of the " n " modules eno-reconciler already required (above)" > "/dev/stderr"
				exit 1
			}
			print "eno-wire: all " n " modules eno-reconciler required are at the same version; " added " added" (added ? ":" list : "") > "/dev/stderr"
		}
	' "$before" "$after"
}

gomod_lines() { grep -E '^(go|toolchain) ' "$1" || true; }

case "${1:-}" in
--patch)
	[[ $# -eq 2 ]] || die "usage: $0 --patch MAIN_GO"
	patch "$2"
	exit 0
	;;
--compare)
	[[ $# -eq 3 ]] || die "usage: $0 --compare BEFORE AFTER"
	MODULE="$module" compare "$2" "$3"
	exit $?
	;;
esac

[[ ($# -eq 2 || $# -eq 3) && -n "$1" && -n "$2" ]] ||
	die "usage: $0 SRC_DIR OUT_BINARY [FAULTS_BINARY]  (or --patch MAIN_GO, --compare BEFORE AFTER)"
src="$1"
outbin="$2"
faultsbin="${3:-}"
[[ -d "$src" ]] || die "SRC_DIR=$src is not a directory (unpack Eno's source first)"
[[ -f "$src/go.mod" ]] && grep -q '^module github.com/Azure/eno$' "$src/go.mod" ||
	die "$src/go.mod is not github.com/Azure/eno's: SRC_DIR must be an unpacked Eno source tree"
[[ -f "$src/cmd/eno-reconciler/main.go" ]] || die "$src has no cmd/eno-reconciler/main.go"
command -v go >/dev/null 2>&1 || die "go is not on PATH"
case "$outbin" in /*) ;; *) outbin="$PWD/$outbin" ;; esac
case "$faultsbin" in /* | "") ;; *) faultsbin="$PWD/$faultsbin" ;; esac

tmp="$(mktemp -d "${TMPDIR:-/tmp}/eno-wire.XXXXXX")"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
work="$tmp/src"
mkdir -p "$work"
(cd "$src" && tar --exclude=./.git -cf - .) | tar -xf - -C "$work"
export GOWORK=off GOFLAGS="-mod=mod${GOFLAGS:+ $GOFLAGS}" # make eno-reconciler-image adds -trimpath and a fixed build id
cd "$work"

log "module versions of stock Eno (GOWORK=off go list -m all)"
go list -m all >"$tmp/before.txt"
gomod_lines go.mod >"$tmp/gomod-before.txt"

patch "$work/cmd/eno-reconciler/main.go"

log "requiring $module v0.0.0, replaced by $root"
go mod edit -require="$module@v0.0.0" -replace="$module=$root"
go mod tidy >&2

go list -m all >"$tmp/after.txt"
gomod_lines go.mod >"$tmp/gomod-after.txt"
if ! diff -u "$tmp/gomod-before.txt" "$tmp/gomod-after.txt" >&2; then
	die "FAIL: importing $module changes eno's go.mod go or toolchain line (above)"
fi
MODULE="$module" compare "$tmp/before.txt" "$tmp/after.txt"

log "building eno-reconciler (GOWORK=off go build ./cmd/eno-reconciler)"
start=$SECONDS
go build -o "$outbin" ./cmd/eno-reconciler
log "built $outbin in $((SECONDS - start)) s"
if [[ -n "$faultsbin" ]]; then
	start=$SECONDS
	go build -tags tombstonerecovery_faults -o "$faultsbin" ./cmd/eno-reconciler
	log "built $faultsbin (fault injection) in $((SECONDS - start)) s"
fi
