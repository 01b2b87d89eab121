#!/usr/bin/env bash
# Build the end-to-end control plane (kube-apiserver, kube-controller-manager,
# kubectl, etcd) from the pinned Go modules under e2e/controlplane/ into a cache
# folder outside git. kube-controller-manager is not started by
# start-controlplane.sh; tests run it themselves when they need a controller
# (the ValidatingAdmissionPolicy status controller, say).
#
# A binary is rebuilt only when its stamp (version, go.sum hash, Go version,
# build flags) differs from what this script would build now.
#
# Usage: build-controlplane.sh [KUBE_VERSION]
#   KUBE_VERSION  v1.37.2 (the default: controlplane/apiserver) or v1.30.14 (the
#                 older apiserver: controlplane/apiserver-v1.30); also taken from
#                 PORTCULLIS_E2E_KUBE_VERSION. etcd is the same for both.
#
# Env:
#   PORTCULLIS_E2E_KUBE_VERSION  as the argument
#   PORTCULLIS_E2E_CACHE  cache root (default: $HOME/.cache/portcullis-e2e)
#   GO                    go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   GOSUMDB, GOTOOLCHAIN, GOPROXY  passed through to go unchanged
#
# Progress goes to stderr; the last line on stdout is the bin dir.
set -euo pipefail

ETCD_VERSION=v3.6.16
K8S_VERSION="${1:-${PORTCULLIS_E2E_KUBE_VERSION:-v1.37.2}}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${K8S_VERSION}" in
  v1.37.2) apiserver_module="${here}/controlplane/apiserver" ;;
  v1.30.14) apiserver_module="${here}/controlplane/apiserver-v1.30" ;;
  *) printf 'build-controlplane: error: unknown Kubernetes version %s (v1.37.2 or v1.30.14)\n' "${K8S_VERSION}" >&2; exit 2 ;;
esac
cache_root="${PORTCULLIS_E2E_CACHE:-${HOME}/.cache/portcullis-e2e}"
bin_dir="${cache_root}/${K8S_VERSION}"

log() { printf 'build-controlplane: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

go_bin="${GO:-}"
if [[ -z "${go_bin}" ]]; then
  if command -v go >/dev/null 2>&1; then
    go_bin="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then
    go_bin=/usr/local/go/bin/go
  else
    die "go not found: install Go >= 1.26 (or set GO=/path/to/go); it is needed to build kube-apiserver, kube-controller-manager, kubectl and etcd"
  fi
fi
[[ -x "${go_bin}" ]] || command -v "${go_bin}" >/dev/null 2>&1 || die "GO=${go_bin} is not executable"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"

# The pins live in the go.mod files; refuse to build if they drift from the
# versions this script names (the stamp and the -X flags use them).
grep -q "k8s.io/kubernetes ${K8S_VERSION}\$" "${apiserver_module}/go.mod" \
  || die "${apiserver_module}/go.mod does not require k8s.io/kubernetes ${K8S_VERSION}"
grep -q "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}\$" "${here}/controlplane/etcd/go.mod" \
  || die "controlplane/etcd/go.mod does not require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}"

mkdir -p "${bin_dir}"

# One build at a time per cache folder.
if command -v flock >/dev/null 2>&1; then
  exec 9>"${cache_root}/.build.lock"  # shared by all versions: they share the Go build cache
  flock 9
fi

go_version="$("${go_bin}" env GOVERSION)"
k8s_minor="${K8S_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${k8s_minor} -X ${pkg}.gitTreeState=clean"
done
etcd_ldflags="-s -w"

start_all=${SECONDS}
built=()
skipped=()

# build NAME MODULE_DIR PACKAGE VERSION LDFLAGS
build() {
  local name="$1" mod_dir="$2" pkg="$3" version="$4" ldflags="$5"
  local out="${bin_dir}/${name}" stamp_file="${bin_dir}/.${name}.stamp"
  local sum_hash stamp
  sum_hash="$(cat "${mod_dir}/go.mod" "${mod_dir}/go.sum" | sha256sum | cut -d' ' -f1)"
  stamp="name=${name} version=${version} package=${pkg} mod-sha256=${sum_hash} go=${go_version} ldflags=${ldflags}"
  if [[ -x "${out}" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
    log "${name} ${version}: up to date (${out})"
    skipped+=("${name}")
    return 0
  fi
  log "${name} ${version}: building ${pkg} (this takes minutes on a cold cache)..."
  local t0=${SECONDS}
  rm -f "${stamp_file}"
  (
    cd "${mod_dir}"
    # -mod=readonly: go.mod/go.sum are the pins; never rewrite them here.
    nice -n 19 "${go_bin}" build -mod=readonly -trimpath -ldflags "${ldflags}" -o "${out}.tmp.$$" "${pkg}"
  ) || { rm -f "${out}.tmp.$$"; die "building ${name} failed (see go output above)"; }
  mv -f "${out}.tmp.$$" "${out}"
  printf '%s\n' "${stamp}" > "${stamp_file}"
  log "${name} ${version}: built in $((SECONDS - t0))s"
  built+=("${name}")
}

build etcd "${here}/controlplane/etcd" go.etcd.io/etcd/server/v3 "${ETCD_VERSION}" "${etcd_ldflags}"
build kube-apiserver "${apiserver_module}" k8s.io/kubernetes/cmd/kube-apiserver "${K8S_VERSION}" "${k8s_ldflags}"
build kube-controller-manager "${apiserver_module}" k8s.io/kubernetes/cmd/kube-controller-manager "${K8S_VERSION}" "${k8s_ldflags}"
build kubectl "${apiserver_module}" k8s.io/kubernetes/cmd/kubectl "${K8S_VERSION}" "${k8s_ldflags}"

elapsed=$((SECONDS - start_all))
if ((${#built[@]} == 0)); then
  log "warm: all binaries up to date, ${elapsed}s"
else
  log "cold: built ${built[*]} in ${elapsed}s${skipped[*]:+ (up to date: ${skipped[*]})}"
fi
printf '%s\n' "${bin_dir}"
