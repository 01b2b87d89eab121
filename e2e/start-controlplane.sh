#!/usr/bin/env bash
# Start a throw-away control plane (etcd + kube-apiserver) on 127.0.0.1.
#
# Usage:
#   set -a; eval "$(e2e/start-controlplane.sh)"; set +a
#   ...
#   e2e/stop-controlplane.sh "$E2E_DIR"
#
# stdout carries only KEY=VALUE lines (shell-quoted with printf %q, so plain
# paths come out unquoted and are easy to parse from other languages):
#   KUBECONFIG E2E_DIR APISERVER_PID ETCD_PID E2E_CA_CERT E2E_CA_KEY
#   E2E_APISERVER_URL E2E_ETCD_URL E2E_BIN_DIR KUBECTL
# Everything else goes to stderr. On any failure, Ctrl-C or TERM before the
# control plane is ready, both processes are stopped and E2E_DIR is removed.
#
# Env:
#   PORTCULLIS_E2E_BIN            folder with etcd, kube-apiserver, kubectl
#                                 (default: run build-controlplane.sh, which is a
#                                 no-op when the cache is up to date)
#   PORTCULLIS_E2E_KUBE_VERSION   without PORTCULLIS_E2E_BIN: the version the
#                                 build script builds (v1.37.2, or v1.30.14)
#   PORTCULLIS_E2E_START_TIMEOUT  seconds to wait for readiness (default 120)
#   PORTCULLIS_E2E_APISERVER_ARGS extra kube-apiserver flags (word-split)
#   PORTCULLIS_E2E_KEEP_ON_FAILURE=1  keep E2E_DIR (logs) when start fails
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
timeout_s="${PORTCULLIS_E2E_START_TIMEOUT:-120}"

log() { printf 'start-controlplane: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

for tool in openssl curl base64; do
  command -v "${tool}" >/dev/null 2>&1 || die "${tool} not found"
done

# ---------------------------------------------------------------- binaries
if [[ -n "${PORTCULLIS_E2E_BIN:-}" ]]; then
  bin_dir="${PORTCULLIS_E2E_BIN}"
else
  bin_dir="$("${here}/build-controlplane.sh" | tail -n 1)"
fi
for b in etcd kube-apiserver kubectl; do
  [[ -x "${bin_dir}/${b}" ]] || die "${bin_dir}/${b} missing: run e2e/build-controlplane.sh"
done

# ---------------------------------------------------------------- state + teardown
dir="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-e2e.XXXXXX")"
touch "${dir}/.portcullis-e2e"   # marker: stop-controlplane.sh only removes such dirs
etcd_pid=""
apiserver_pid=""
ready=0
interrupted=0

stop_pid() { # stop_pid PID: TERM, wait up to 10s, then KILL (PID is our child)
  local pid="$1" i
  [[ -n "${pid}" ]] || return 0
  kill -TERM "${pid}" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
}

stop_all() {
  stop_pid "${apiserver_pid}"; apiserver_pid=""
  stop_pid "${etcd_pid}"; etcd_pid=""
}

cleanup() {
  local rc=$?
  ((ready)) && return 0
  # Show the logs as they were at the failure, before shutdown adds noise.
  if ((!interrupted)); then
    for f in etcd.log apiserver.log; do
      if [[ -s "${dir}/${f}" ]]; then
        log "last lines of ${f}:"
        tail -n 20 "${dir}/${f}" >&2 || true
      fi
    done
  fi
  stop_all
  if [[ -d "${dir}" ]]; then
    if [[ "${PORTCULLIS_E2E_KEEP_ON_FAILURE:-0}" == 1 ]]; then
      log "kept ${dir}"
    else
      rm -rf "${dir}"
    fi
  fi
  log "failed (exit ${rc}); control plane torn down"
}
trap cleanup EXIT
# Note: a shell without job control starts background commands with SIGINT
# ignored, and an ignored signal cannot be trapped: harnesses should send TERM.
trap 'interrupted=1; log "interrupted"; exit 130' INT
trap 'interrupted=1; log "terminated"; exit 143' TERM

# ---------------------------------------------------------------- certificates
pki="${dir}/pki"
mkdir -p "${pki}"
(
  cd "${pki}"
  umask 077
  ossl() { openssl "$@" 2>>openssl.log || { cat openssl.log >&2; exit 1; }; }
  ossl genrsa -out ca.key 2048
  ossl req -x509 -new -key ca.key -sha256 -days 30 -subj "/CN=portcullis-e2e-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out ca.crt

  issue() { # issue NAME SUBJECT EXTENSIONS
    ossl genrsa -out "$1.key" 2048
    ossl req -new -key "$1.key" -subj "$2" -out "$1.csr"
    printf '%s\n' "$3" > "$1.ext"
    ossl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 30 \
      -extfile "$1.ext" -out "$1.crt"
    rm -f "$1.csr" "$1.ext"
  }
  issue apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  issue admin "/O=system:masters/CN=portcullis-e2e-admin" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  ossl genrsa -out sa.key 2048
  ossl rsa -in sa.key -pubout -out sa.pub
  rm -f openssl.log
)

# ---------------------------------------------------------------- ports
# Ask the kernel for free ports (bind to port 0) all at once so they differ;
# a start whose port was grabbed in the meantime is retried with new ports.
free_ports() { # free_ports N
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
  else # fallback: random high ports that nothing answers on
    local out=() p
    while ((${#out[@]} < $1)); do
      p=$((20000 + RANDOM % 30000))
      [[ " ${out[*]} " == *" ${p} "* ]] && continue
      (exec 3<>"/dev/tcp/127.0.0.1/${p}") 2>/dev/null && continue
      out+=("${p}")
    done
    echo "${out[*]}"
  fi
}

deadline=$((SECONDS + timeout_s))
port_in_use() { grep -qiE 'address already in use|bind: address' "$1" 2>/dev/null; }

# wait_for NAME PID CHECK...: poll CHECK every 0.2s until it succeeds.
# Returns 1 if the process died, 2 on deadline.
wait_for() {
  local name="$1" pid="$2"; shift 2
  while :; do
    kill -0 "${pid}" 2>/dev/null || { log "${name} exited"; return 1; }
    if "$@"; then
      # Make sure it was our process that answered, not a stranger on the port.
      kill -0 "${pid}" 2>/dev/null || { log "${name} exited"; return 1; }
      return 0
    fi
    ((SECONDS < deadline)) || { log "${name}: not ready within ${timeout_s}s"; return 2; }
    sleep 0.2
  done
}

etcd_healthy() {
  curl -fsS --max-time 2 "${etcd_url}/health" 2>/dev/null | grep -q '"health":"true"'
}
api() { # api PATH: prints body, fails on non-2xx
  curl -fsS --max-time 5 --cacert "${pki}/ca.crt" --cert "${pki}/admin.crt" --key "${pki}/admin.key" \
    "${apiserver_url}$1"
}
apiserver_ready() {
  [[ "$(api /readyz 2>/dev/null)" == ok ]] && api /api/v1/namespaces/default >/dev/null 2>&1
}

# ---------------------------------------------------------------- etcd + apiserver
attempt=0
while :; do
  attempt=$((attempt + 1))
  ports="$(free_ports 3)" || die "could not pick free ports"
  read -r etcd_client_port etcd_peer_port apiserver_port <<<"${ports}"
  [[ -n "${apiserver_port:-}" ]] || die "could not pick free ports (got '${ports}')"
  etcd_url="http://127.0.0.1:${etcd_client_port}"
  apiserver_url="https://127.0.0.1:${apiserver_port}"
  rm -rf "${dir}/etcd-data"
  log "attempt ${attempt}: etcd on ${etcd_client_port} (peer ${etcd_peer_port}), kube-apiserver on ${apiserver_port}"

  "${bin_dir}/etcd" \
    --name=e2e \
    --data-dir="${dir}/etcd-data" \
    --listen-client-urls="${etcd_url}" \
    --advertise-client-urls="${etcd_url}" \
    --listen-peer-urls="http://127.0.0.1:${etcd_peer_port}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${etcd_peer_port}" \
    --initial-cluster="e2e=http://127.0.0.1:${etcd_peer_port}" \
    --initial-cluster-state=new \
    --unsafe-no-fsync \
    --log-level=warn \
    </dev/null >"${dir}/etcd.log" 2>&1 &
  etcd_pid=$!

  if ! wait_for etcd "${etcd_pid}" etcd_healthy; then
    if port_in_use "${dir}/etcd.log" && ((attempt < 3)); then stop_all; continue; fi
    die "etcd did not become healthy"
  fi
  log "etcd healthy (pid ${etcd_pid})"

  # Flags as envtest uses them: no controller-manager, no kubelet.
  # ValidatingAdmissionPolicy and MutatingAdmissionPolicy are GA in 1.37
  # (admissionregistration.k8s.io/v1, served and admitted by default), so no
  # --runtime-config or --feature-gates is needed. The same flags serve v1.30.14
  # unchanged: ValidatingAdmissionPolicy is GA there, MutatingAdmissionPolicy
  # does not exist (it is what Portcullis brings to such a cluster).
  # shellcheck disable=SC2086
  "${bin_dir}/kube-apiserver" \
    --etcd-servers="${etcd_url}" \
    --etcd-prefix=/registry \
    --bind-address=127.0.0.1 \
    --secure-port="${apiserver_port}" \
    --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none \
    --cert-dir="${dir}/apiserver-certs" \
    --tls-cert-file="${pki}/apiserver.crt" \
    --tls-private-key-file="${pki}/apiserver.key" \
    --client-ca-file="${pki}/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${pki}/sa.pub" \
    --service-account-signing-key-file="${pki}/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --disable-admission-plugins=ServiceAccount \
    --allow-privileged=true \
    ${PORTCULLIS_E2E_APISERVER_ARGS:-} \
    </dev/null >"${dir}/apiserver.log" 2>&1 &
  apiserver_pid=$!

  if ! wait_for kube-apiserver "${apiserver_pid}" apiserver_ready; then
    if port_in_use "${dir}/apiserver.log" && ((attempt < 3)); then stop_all; continue; fi
    die "kube-apiserver did not become ready"
  fi
  break
done
echo "${etcd_pid}" > "${dir}/etcd.pid"
echo "${apiserver_pid}" > "${dir}/apiserver.pid"

# ---------------------------------------------------------------- kubeconfig
b64() { base64 -w0 < "$1"; }
kubeconfig="${dir}/kubeconfig"
cat > "${kubeconfig}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: portcullis-e2e
  cluster:
    server: ${apiserver_url}
    certificate-authority-data: $(b64 "${pki}/ca.crt")
users:
- name: portcullis-e2e-admin
  user:
    client-certificate-data: $(b64 "${pki}/admin.crt")
    client-key-data: $(b64 "${pki}/admin.key")
contexts:
- name: portcullis-e2e
  context:
    cluster: portcullis-e2e
    user: portcullis-e2e-admin
    namespace: default
current-context: portcullis-e2e
EOF
chmod 600 "${kubeconfig}"

{
  printf 'KUBECONFIG=%q\n' "${kubeconfig}"
  printf 'E2E_DIR=%q\n' "${dir}"
  printf 'APISERVER_PID=%q\n' "${apiserver_pid}"
  printf 'ETCD_PID=%q\n' "${etcd_pid}"
  printf 'E2E_CA_CERT=%q\n' "${pki}/ca.crt"
  printf 'E2E_CA_KEY=%q\n' "${pki}/ca.key"
  printf 'E2E_APISERVER_URL=%q\n' "${apiserver_url}"
  printf 'E2E_ETCD_URL=%q\n' "${etcd_url}"
  printf 'E2E_BIN_DIR=%q\n' "${bin_dir}"
  printf 'KUBECTL=%q\n' "${bin_dir}/kubectl"
} > "${dir}/env"
ready=1
trap - EXIT INT TERM
log "ready in ${SECONDS}s: ${apiserver_url} (stop with: e2e/stop-controlplane.sh ${dir})"
cat "${dir}/env"
