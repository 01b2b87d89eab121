#!/usr/bin/env bash
# Stop a control plane started by start-controlplane.sh and remove its folder.
#
# Usage: e2e/stop-controlplane.sh E2E_DIR     (or with E2E_DIR in the environment)
#
# Stops kube-apiserver first, then etcd: SIGTERM, up to 15s grace, then SIGKILL.
# A PID is signalled only while /proc/PID/cmdline still names E2E_DIR, so a
# recycled PID is never hit. Safe to call twice.
set -euo pipefail

log() { printf 'stop-controlplane: %s\n' "$*" >&2; }

dir="${1:-${E2E_DIR:-}}"
[[ -n "${dir}" ]] || { log "usage: $0 E2E_DIR"; exit 2; }
if [[ ! -d "${dir}" ]]; then
  log "${dir} does not exist (already stopped?)"
  exit 0
fi
[[ -f "${dir}/.portcullis-e2e" ]] || { log "${dir} was not made by start-controlplane.sh; refusing"; exit 2; }

ours() { # ours PID: alive (not a zombie) and started for this dir
  local pid="$1" state
  [[ -r "/proc/${pid}/cmdline" ]] || return 1
  state="$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null || true)"
  [[ "${state}" != Z ]] || return 1
  tr '\0' ' ' < "/proc/${pid}/cmdline" | grep -qF -- "${dir}"
}

stop() { # stop NAME
  local name="$1" pid i
  [[ -f "${dir}/${name}.pid" ]] || return 0
  pid="$(cat "${dir}/${name}.pid")"
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 0
  ours "${pid}" || return 0
  kill -TERM "${pid}" 2>/dev/null || return 0
  for ((i = 0; i < 150; i++)); do
    ours "${pid}" || { log "${name} (pid ${pid}) stopped"; return 0; }
    sleep 0.1
  done
  log "${name} (pid ${pid}) ignored SIGTERM for 15s; sending SIGKILL"
  kill -KILL "${pid}" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    ours "${pid}" || return 0
    sleep 0.1
  done
  log "${name} (pid ${pid}) still running"
  return 1
}

rc=0
stop apiserver || rc=1
stop etcd || rc=1
if ((rc == 0)); then
  rm -rf "${dir}"
  log "removed ${dir}"
else
  log "kept ${dir}: a process did not stop"
fi
exit "${rc}"
