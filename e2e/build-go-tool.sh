#!/usr/bin/env bash
# Build one Go command from a pinned module folder under e2e/ into a cache folder outside git:
# the shared body of build-helm.sh and build-gator.sh (build-controlplane.sh does the same for
# kube-apiserver). The binary is rebuilt only when its stamp (version, go.mod/go.sum hash, Go
# version, build flags) differs from what would be built now.
#
# Usage: build-go-tool.sh NAME VERSION MODULE PACKAGE LDFLAGS
#   NAME     the binary's and cache folder's name (…/NAME-VERSION/NAME) and folder e2e/NAME
#   VERSION  the release, which e2e/NAME/go.mod must require MODULE at
#   MODULE   the Go module pinned in e2e/NAME/go.mod
#   PACKAGE  the command's package
#   LDFLAGS  go build -ldflags (static: CGO_ENABLED=0 always)
#
# Env:
#   PORTCULLIS_E2E_CACHE  cache root (default: $HOME/.cache/portcullis-e2e)
#   GO                    go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   GOSUMDB, GOTOOLCHAIN, GOPROXY  passed through to go unchanged (go.sum is
#                         committed, so the checksum database is not needed)
#
# Progress goes to stderr; the last line on stdout is the binary's path.
set -euo pipefail

[[ $# -eq 5 ]] || { echo "usage: $0 NAME VERSION MODULE PACKAGE LDFLAGS" >&2; exit 2; }
name="$1" version="$2" module="$3" pkg="$4" ldflags="$5"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${PORTCULLIS_E2E_CACHE:-${HOME}/.cache/portcullis-e2e}"
bin_dir="${cache_root}/${name}-${version}"
mod_dir="${here}/${name}"

log() { printf 'build-%s: %s\n' "${name}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

go_bin="${GO:-}"
if [[ -z "${go_bin}" ]]; then
  if command -v go >/dev/null 2>&1; then
    go_bin="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then
    go_bin=/usr/local/go/bin/go
  else
    die "go not found: install Go >= 1.26 (or set GO=/path/to/go); it is needed to build ${name}"
  fi
fi
[[ -x "${go_bin}" ]] || command -v "${go_bin}" >/dev/null 2>&1 || die "GO=${go_bin} is not executable"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"

# The pin lives in go.mod; refuse to build if it drifts from the version named by the caller
# (the stamp and its -X flags use it).
grep -Eq "^require ${module//./\\.} ${version}( |\$)" "${mod_dir}/go.mod" \
  || die "e2e/${name}/go.mod does not require ${module} ${version}"

mkdir -p "${bin_dir}"

# One build at a time per cache folder (the lock the control plane build uses).
if command -v flock >/dev/null 2>&1; then
  exec 9>"${cache_root}/.build.lock"
  flock 9
fi

go_version="$("${go_bin}" env GOVERSION)"
out="${bin_dir}/${name}"
stamp_file="${bin_dir}/.${name}.stamp"
sum_hash="$(cat "${mod_dir}/go.mod" "${mod_dir}/go.sum" | sha256sum | cut -d' ' -f1)"
stamp="name=${name} version=${version} package=${pkg} mod-sha256=${sum_hash} go=${go_version} cgo=0 ldflags=${ldflags}"

t0=${SECONDS}
if [[ -x "${out}" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
  log "warm: ${name} ${version} up to date (${out}), $((SECONDS - t0))s"
else
  log "${name} ${version}: building ${pkg} (minutes on a cold cache)..."
  rm -f "${stamp_file}"
  (
    cd "${mod_dir}"
    # -mod=readonly: go.mod/go.sum are the pins; never rewrite them here.
    CGO_ENABLED=0 nice -n 19 "${go_bin}" build -mod=readonly -trimpath -ldflags "${ldflags}" -o "${out}.tmp.$$" "${pkg}"
  ) || { rm -f "${out}.tmp.$$"; die "building ${name} failed (see go output above)"; }
  mv -f "${out}.tmp.$$" "${out}"
  printf '%s\n' "${stamp}" > "${stamp_file}"
  log "cold: built ${name} ${version} in $((SECONDS - t0))s"
fi
printf '%s\n' "${out}"
