#!/usr/bin/env bash
# Builds stock Eno (eno-controller, eno-reconciler and the executor) from ENO_SRC for `make test-eno`,
# and the eno-reconciler with the recovery controller wired in (hack/eno-wire.sh).
#
# Usage: hack/eno-build.sh ENO_SRC
#   ENO_SRC is Eno's source: a directory or a .tar.gz (e.g. path/to/eno-v0.2.17.tar.gz).
#
# Layout, under $ENO_BUILD_DIR (default <repo>/bin/eno):
#   <key>/src                     the unpacked (or copied) source; never the caller's own directory
#   <key>/bin/eno-controller      stock
#   <key>/bin/eno-reconciler      stock
#   <key>/bin/executor            symlink to eno-controller (the executor is eno-controller run under
#                                 a name ending in "executor")
#   <key>/bin/eno-reconciler-wired  stock eno-reconciler plus this checkout's recovery controller
#   <key>/bin/eno-reconciler-wired-faults  the same, built with the fault injection of the
#                                 acceptance tests (tag tombstonerecovery_faults)
#
# <key> identifies the source by content: for a tarball, the sha256 of the file; for a directory, the
# sha256 of the sorted list of "<sha256>  <path>" lines of its files (.git excluded). Same source, same
# key, so the stock binaries are built once and reused (a build is complete when <key>/bin/.complete
# exists). The wired binary depends on this checkout too, so it is rebuilt on every run (Go's build
# cache keeps that quick when nothing changed).
#
# Eno builds with GOWORK=off: its go.work names a module the proxy refuses. Progress goes to stderr;
# the only line on stdout is the absolute path of <key>, for the Makefile.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${ENO_BUILD_DIR:-$root/bin/eno}"

log() { echo "eno-build: $*" >&2; }
die() {
	log "$*"
	exit 1
}

[[ $# -eq 1 && -n "$1" ]] || die "usage: $0 ENO_SRC (a directory or a .tar.gz of Eno's source)"
src="$1"
command -v go >/dev/null 2>&1 || die "go is not on PATH"

# source_key prints the content key of the source.
source_key() {
	if [[ -d "$src" ]]; then
		(cd "$src" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
			sha256sum | cut -c1-16
	else
		sha256sum "$src" | cut -c1-16
	fi
}

# is_eno DIR succeeds when DIR is Eno's source: its module and the four CRDs.
is_eno() {
	[[ -f "$1/go.mod" ]] && grep -q '^module github.com/Azure/eno$' "$1/go.mod" || return 1
	local crd
	for crd in compositions resourceslices synthesizers symphonies; do
		[[ -f "$1/api/v1/config/crd/eno.azure.io_$crd.yaml" ]] || return 1
	done
}
not_eno="does not look like Eno's source (github.com/Azure/eno's go.mod and api/v1/config/crd/*.yaml)"

case "$src" in
*.tar.gz | *.tgz) [[ -f "$src" ]] || die "ENO_SRC=$src: no such file" ;;
*)
	[[ -d "$src" ]] || die "ENO_SRC=$src is neither a directory nor a .tar.gz"
	is_eno "$src" || die "ENO_SRC=$src $not_eno"
	;;
esac

key="$(source_key)"
dir="$out/$key"
bin="$dir/bin"
mkdir -p "$dir"

# Unpack or copy the source once, into a temporary name so an interrupted run leaves nothing usable-looking.
if [[ ! -f "$dir/src/go.mod" ]]; then
	rm -rf "$dir/src" "$dir/src.tmp"
	mkdir -p "$dir/src.tmp"
	if [[ -d "$src" ]]; then
		log "copying $src to $dir/src"
		(cd "$src" && tar --exclude=./.git -cf - .) | tar -xf - -C "$dir/src.tmp"
	else
		log "unpacking $src to $dir/src"
		tar -xzf "$src" -C "$dir/src.tmp"
		# A release tarball holds one top-level directory (eno-v0.2.17/); use its content.
		entries=("$dir/src.tmp"/*)
		if [[ ${#entries[@]} -eq 1 && -d "${entries[0]}" && ! -f "$dir/src.tmp/go.mod" ]]; then
			mv "${entries[0]}" "$dir/src.unpacked"
			rmdir "$dir/src.tmp"
			mv "$dir/src.unpacked" "$dir/src.tmp"
		fi
	fi
	if ! is_eno "$dir/src.tmp"; then
		rm -rf "$dir"
		die "ENO_SRC=$src $not_eno"
	fi
	mv "$dir/src.tmp" "$dir/src"
fi
is_eno "$dir/src" || die "$dir/src $not_eno; remove $dir and retry"

if [[ -f "$bin/.complete" && -x "$bin/eno-controller" && -x "$bin/eno-reconciler" && -L "$bin/executor" ]]; then
	log "stock Eno is up to date ($bin)"
else
	rm -rf "$bin"
	mkdir -p "$bin"
	log "building eno-controller and eno-reconciler in $dir/src (about 3 min cold on 2 cores)..."
	start=$SECONDS
	(cd "$dir/src" && GOWORK=off go build -o "$bin/" ./cmd/eno-controller ./cmd/eno-reconciler) >&2
	ln -s eno-controller "$bin/executor"
	touch "$bin/.complete"
	log "built stock Eno in $((SECONDS - start)) s"
fi

wire="$root/hack/eno-wire.sh"
if [[ -x "$wire" ]]; then
	log "building eno-reconciler with the recovery controller wired in (hack/eno-wire.sh)..."
	start=$SECONDS
	rm -f "$bin/eno-reconciler-wired.tmp" "$bin/eno-reconciler-wired-faults.tmp"
	"$wire" "$dir/src" "$bin/eno-reconciler-wired.tmp" "$bin/eno-reconciler-wired-faults.tmp" >&2
	mv -f "$bin/eno-reconciler-wired.tmp" "$bin/eno-reconciler-wired"
	mv -f "$bin/eno-reconciler-wired-faults.tmp" "$bin/eno-reconciler-wired-faults"
	log "built the wired eno-reconciler in $((SECONDS - start)) s"
else
	rm -f "$bin/eno-reconciler-wired"
	log "hack/eno-wire.sh not found: no wired eno-reconciler; its scenarios will fail"
fi

echo "$dir"
