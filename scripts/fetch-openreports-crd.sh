#!/usr/bin/env bash
# Fetches the OpenReports API module (github.com/openreports/reports-api) from the Go module
# proxy and copies its two CustomResourceDefinitions (Report, ClusterReport of
# openreports.io/v1alpha1) into tests/fixtures/openreports/, where tests/audit_e2e.rs installs
# them to validate `portcullis audit --output openreports` with `kubectl apply --dry-run=server`.
# The fixtures are committed; run this again only to move to another version.
#
# The module goes to a Go module cache of its own, outside git:
#   ${PORTCULLIS_CACHE:-$HOME/.cache/portcullis}/openreports/mod
# Needs Go; exits 3 when `go` is not on PATH.
set -euo pipefail

module=github.com/openreports/reports-api
version=v0.2.1

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/tests/fixtures/openreports"

if ! command -v go >/dev/null 2>&1; then
    echo "fetch-openreports-crd: go is not installed (needed to download $module@$version)" >&2
    exit 3
fi
if [[ -z "${PORTCULLIS_CACHE:-}" && -z "${HOME:-}" ]]; then
    echo "fetch-openreports-crd: set PORTCULLIS_CACHE or HOME to choose a cache directory" >&2
    exit 2
fi
cache="${PORTCULLIS_CACHE:-$HOME/.cache/portcullis}/openreports"
mkdir -p "$cache"
cd "$cache" # outside any go.mod or go.work

echo "fetch-openreports-crd: $module@$version into $cache/mod" >&2
if ! json=$(GOMODCACHE="$cache/mod" GOFLAGS=-modcacherw GOWORK=off GO111MODULE=on \
    GOTOOLCHAIN=local go mod download -json "$module@$version"); then
    echo "fetch-openreports-crd: go mod download failed:" >&2
    echo "$json" >&2
    exit 1
fi
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
if [[ -z "$dir" || ! -d "$dir/config/crd" ]]; then
    echo "fetch-openreports-crd: no config/crd in the downloaded module (Dir: '${dir}')" >&2
    exit 1
fi

mkdir -p "$out"
for crd in openreports.io_reports.yaml openreports.io_clusterreports.yaml; do
    {
        echo "# $module@$version config/crd/$crd, copied by scripts/fetch-openreports-crd.sh"
        cat "$dir/config/crd/$crd"
    } >"$out/$crd"
done
echo "fetch-openreports-crd: wrote $out/openreports.io_reports.yaml and openreports.io_clusterreports.yaml" >&2
