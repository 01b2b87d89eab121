#!/usr/bin/env bash
# Build gator, OPA Gatekeeper's authoring CLI (`gator verify`, `gator test`), from
# the pinned Go module under e2e/gator/ into a cache folder outside git, as
# build-helm.sh does for Helm. The Gatekeeper differential tests
# (tests/gatekeeper_gator.rs) and `make gator` use it.
#
# The binary is rebuilt only when its stamp (version, go.mod/go.sum hash, Go
# version, build flags) differs from what this script would build now.
#
# Env:
#   PORTCULLIS_E2E_CACHE  cache root (default: $HOME/.cache/portcullis-e2e)
#   GO                    go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   GOSUMDB, GOTOOLCHAIN, GOPROXY  passed through to go unchanged (go.sum is
#                         committed, so the checksum database is not needed)
#
# Progress goes to stderr; the last line on stdout is the gator binary's path.
set -euo pipefail

GATEKEEPER_VERSION=v3.23.1

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${PORTCULLIS_E2E_CACHE:-${HOME}/.cache/portcullis-e2e}"
bin_dir="${cache_root}/gator-${GATEKEEPER_VERSION}"
mod_dir="${here}/gator"

log() { printf 'build-gator: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

go_bin="${GO:-}"
if [[ -z "${go_bin}" ]]; then
  if command -v go >/dev/null 2>&1; then
    go_bin="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then
    go_bin=/usr/local/go/bin/go
  else
    die "go not found: install Go >= 1.26 (or set GO=/path/to/go); it is needed to build gator"
  fi
fi
[[ -x "${go_bin}" ]] || command -v "${go_bin}" >/dev/null 2>&1 || die "GO=${go_bin} is not executable"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"

# The pin lives in go.mod; refuse to build if it drifts from the version named
# here (the stamp and the -X flag use it).
grep -Eq "^require github\.com/open-policy-agent/gatekeeper/v3 ${GATEKEEPER_VERSION}( |\$)" "${mod_dir}/go.mod" \
  || die "e2e/gator/go.mod does not require github.com/open-policy-agent/gatekeeper/v3 ${GATEKEEPER_VERSION}"

mkdir -p "${bin_dir}"

# One build at a time per cache folder (the lock the control plane build uses).
if command -v flock >/dev/null 2>&1; then
  exec 9>"${cache_root}/.build.lock"
  flock 9
fi

go_version="$("${go_bin}" env GOVERSION)"
pkg=github.com/open-policy-agent/gatekeeper/v3/cmd/gator
# As Gatekeeper's gator.Dockerfile and Makefile: static (CGO_ENABLED=0), and the
# release version in pkg/version (printed by `gator --version`); stripped.
ldflags="-s -w -X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=${GATEKEEPER_VERSION}"
out="${bin_dir}/gator"
stamp_file="${bin_dir}/.gator.stamp"
sum_hash="$(cat "${mod_dir}/go.mod" "${mod_dir}/go.sum" | sha256sum | cut -d' ' -f1)"
stamp="name=gator version=${GATEKEEPER_VERSION} package=${pkg} mod-sha256=${sum_hash} go=${go_version} cgo=0 ldflags=${ldflags}"

t0=${SECONDS}
if [[ -x "${out}" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
  log "warm: gator ${GATEKEEPER_VERSION} up to date (${out}), $((SECONDS - t0))s"
else
  log "gator ${GATEKEEPER_VERSION}: building ${pkg} (minutes on a cold cache)..."
  rm -f "${stamp_file}"
  (
    cd "${mod_dir}"
    # -mod=readonly: go.mod/go.sum are the pins; never rewrite them here.
    CGO_ENABLED=0 nice -n 19 "${go_bin}" build -mod=readonly -trimpath -ldflags "${ldflags}" -o "${out}.tmp.$$" "${pkg}"
  ) || { rm -f "${out}.tmp.$$"; die "building gator failed (see go output above)"; }
  mv -f "${out}.tmp.$$" "${out}"
  printf '%s\n' "${stamp}" > "${stamp_file}"
  log "cold: built gator ${GATEKEEPER_VERSION} in $((SECONDS - t0))s"
fi
printf '%s\n' "${out}"
