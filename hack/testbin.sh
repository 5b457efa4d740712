#!/usr/bin/env bash
# Builds the etcd and kube-apiserver binaries that internal/kubetest runs, from the
# pinned sources in test/kube (its own Go module, so the main module's dependency
# graph is untouched). Idempotent: a binary is rebuilt only when it is missing or
# test/kube/go.mod is newer than it. Needs only Go and the Go module proxy.
#
# Output directory: $KUBETEST_BIN_DIR if set, else <repo>/bin.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kube="$root/test/kube"
bin="${KUBETEST_BIN_DIR:-$root/bin}"

if ! command -v go >/dev/null 2>&1; then
	echo "testbin: go is not on PATH; install Go first" >&2
	exit 1
fi
if [[ ! -f "$kube/go.mod" ]]; then
	echo "testbin: $kube/go.mod not found" >&2
	exit 1
fi

# version_of MODULE prints the version test/kube/go.mod requires for MODULE.
version_of() {
	awk -v mod="$1" '
		$1 == "require" && $2 == mod { print $3; exit }
		$1 == mod { print $2; exit }
	' "$kube/go.mod"
}

# needs_build TARGET succeeds when TARGET is missing or older than test/kube/go.mod.
needs_build() {
	[[ ! -x "$1" || "$kube/go.mod" -nt "$1" ]]
}

# build NAME PACKAGE VERSION HINT [go build flags...]
build() {
	local name="$1" pkg="$2" version="$3" hint="$4"
	shift 4
	local target="$bin/$name"
	if ! needs_build "$target"; then
		echo "testbin: $name $version is up to date ($target)"
		return
	fi
	echo "testbin: building $name $version ($hint)..."
	local start=$SECONDS
	# Build to a temporary name so an interrupted build never leaves a usable-looking binary.
	(cd "$kube" && GOWORK=off go build "$@" -o "$target.tmp" "$pkg")
	mv -f "$target.tmp" "$target"
	echo "testbin: built $target in $((SECONDS - start)) s"
}

mkdir -p "$bin"

etcd_version="$(version_of go.etcd.io/etcd/server/v3)"
kube_version="$(version_of k8s.io/kubernetes)"
if [[ -z "$etcd_version" || -z "$kube_version" ]]; then
	echo "testbin: could not read the etcd or kubernetes version from $kube/go.mod" >&2
	exit 1
fi

build etcd go.etcd.io/etcd/server/v3 "$etcd_version" "first build takes ~2 min"

# Stamp the real version so /version reports it instead of v0.0.0-master.
kube_minor="${kube_version#v*.}"
kube_minor="${kube_minor%%.*}"
kube_major="${kube_version#v}"
kube_major="${kube_major%%.*}"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_version" "first build takes ~10 min" \
	-ldflags "-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=$kube_major -X k8s.io/component-base/version.gitMinor=$kube_minor"

echo "testbin: binaries ready in $bin"
