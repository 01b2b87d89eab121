#!/usr/bin/env bash
# Fetches the upstream Pod Security Admission module (k8s.io/pod-security-admission), whose
# test/testdata holds the Pod fixtures that tests/pod_security_conformance.rs runs against
# src/engine/pod_security. Prints the module directory (the one holding test/testdata) on its
# last line; progress and errors go to stderr.
#
# The module goes to a Go module cache of its own, outside git:
#   ${PORTCULLIS_CACHE:-$HOME/.cache/portcullis}/psa/mod
# Downloaded once (through GOPROXY, checked against GOSUMDB as `go` always does), then served
# from that cache without network. Files are written writable (-modcacherw) so that
# `rm -rf` on the cache works. Needs Go; exits 3 when `go` is not on PATH.
set -euo pipefail

module=k8s.io/pod-security-admission
version=v0.37.2 # Kubernetes 1.37; keep in step with LATEST_MINOR in src/engine/pod_security

if ! command -v go >/dev/null 2>&1; then
    echo "fetch-psa-fixtures: go is not installed (needed to download $module@$version)" >&2
    exit 3
fi

if [[ -z "${PORTCULLIS_CACHE:-}" && -z "${HOME:-}" ]]; then
    echo "fetch-psa-fixtures: set PORTCULLIS_CACHE or HOME to choose a cache directory" >&2
    exit 2
fi
cache="${PORTCULLIS_CACHE:-$HOME/.cache/portcullis}/psa"
mkdir -p "$cache"
cd "$cache" # outside any go.mod or go.work

echo "fetch-psa-fixtures: $module@$version into $cache/mod" >&2
# Outside a module `go mod download` takes module@version; the user's GOFLAGS (e.g. -mod=vendor)
# must not leak in, and no toolchain switch is wanted for a download.
if ! json=$(GOMODCACHE="$cache/mod" GOFLAGS=-modcacherw GOWORK=off GO111MODULE=on \
    GOTOOLCHAIN=local go mod download -json "$module@$version"); then
    echo "fetch-psa-fixtures: go mod download failed:" >&2
    echo "$json" >&2
    exit 1
fi

dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
if [[ -z "$dir" || ! -d "$dir/test/testdata" ]]; then
    echo "fetch-psa-fixtures: no test/testdata in the downloaded module (Dir: '${dir}')" >&2
    echo "$json" >&2
    exit 1
fi
echo "$dir"
