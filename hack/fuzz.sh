#!/usr/bin/env bash
# make fuzz: run every fuzz target in the main module, one at a time, for a fixed time each.
# Usage: hack/fuzz.sh [FUZZTIME]   (default 30s; any value `go test -fuzztime` accepts)
# Targets are discovered with `go test -list` per package, so new ones are picked up without
# editing this script. Packages without a `func Fuzz` in their test files are not listed, so
# their TestMain (which may start an API server) never runs here.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fuzztime="${1:-30s}"

echo "fuzz: discovering fuzz targets"
targets=()
while read -r pkg dir; do
	if ! grep -qs '^func Fuzz' "$dir"/*_test.go; then
		continue
	fi
	while read -r name; do
		targets+=("$pkg $name")
	done < <(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./...)

if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

echo "fuzz: ${#targets[@]} target(s), ${fuzztime} each"
i=0
for target in "${targets[@]}"; do
	i=$((i + 1))
	read -r pkg name <<<"$target"
	echo "fuzz: [$i/${#targets[@]}] $pkg $name for $fuzztime"
	go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"
done
echo "fuzz: ok, ${#targets[@]} target(s) ran for $fuzztime each without a failure"
