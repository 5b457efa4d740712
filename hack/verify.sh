#!/usr/bin/env bash
# make verify: generated fakes are fresh, code is formatted and vetted, packages import only in
# the allowed direction, references to the design and Markdown links resolve inside the
# repository, each document stays within its line budget, README.md's flag table is what
# `tombstone-recovery run -h` prints, and the main module stays embeddable in eno-reconciler
# (design §8.1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fail=0

echo "verify: counterfeiter fakes are up to date"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r ports/portsfakes "$tmp/before"
go generate ./ports/... >/dev/null 2>&1
if ! diff -r "$tmp/before" ports/portsfakes >/dev/null; then
	echo "verify: ports/portsfakes is stale; run 'make generate' and commit the result" >&2
	diff -r "$tmp/before" ports/portsfakes | head -20 >&2 || true
	rm -rf ports/portsfakes && cp -r "$tmp/before" ports/portsfakes
	fail=1
fi

echo "verify: gofmt"
unformatted="$(git ls-files '*.go' | xargs gofmt -l)"
if [[ -n "$unformatted" ]]; then
	echo "verify: gofmt would change:" >&2
	echo "$unformatted" >&2
	fail=1
fi

echo "verify: go vet"
go vet ./... || fail=1
# test/eno compiles only with the build tag eno (make test-eno); vet it too.
go vet -tags eno ./test/eno/... || fail=1

echo "verify: import direction and eno-reconciler embedding constraints"
go test -count=1 ./internal/archtest/ || fail=1

echo "verify: references to the design and Markdown links resolve; documents within their budgets"
go run ./hack/designrefs || fail=1

echo "verify: README.md's flag table is what 'tombstone-recovery run -h' prints"
go run ./hack/flagtable || fail=1

echo "verify: counterfeiter stays out of the main module's graph"
if go list -m all 2>/dev/null | grep -q counterfeiter; then
	echo "verify: counterfeiter entered the main module graph; it belongs in tools/go.mod" >&2
	fail=1
fi

if [[ $fail -ne 0 ]]; then
	echo "verify: FAILED" >&2
	exit 1
fi
echo "verify: ok"
