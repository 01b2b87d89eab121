#!/usr/bin/env bash
# Side-by-side load benchmark (`make bench-load`) and its CI smoke (`make bench-smoke`).
#
#   bench/run.sh            Portcullis floor (empty policy folder), Portcullis standard set and
#                           the Go peer (bench/peers/go-webhook), three bodies, c = 1/16/64/256,
#                           memory, policy scale and reload; markdown on stdout and in
#                           bench/results/latest.md
#   bench/run.sh --smoke    Portcullis floor, 10 KB Pod, c = 1 and 4, 100 requests each; exits 1
#                           unless all 200 requests got a 200. No Go needed.
#
# Tools are installed here, outside git, on first use (every build under `nice -n 19`):
#   oha         cargo install --locked --root $CACHE oha   (crates.io, pinned version)
#   go-webhook  bench/build-go-peer.sh: go build from the committed go.mod/go.sum (Go module
#               proxy), in $CACHE/go-webhook/<hash of sources and Go version>/, reused when present
#   gator       e2e/build-gator.sh: Gatekeeper's gator v3.23.1 from e2e/gator/go.mod, in
#               ~/.cache/portcullis-e2e/gator-<version>/ (the Gatekeeper section's `gator bench`)
# CACHE = ${PORTCULLIS_BENCH_CACHE:-$HOME/.cache/portcullis-bench}.
#
# Environment: BENCH_SCALE (request counts, default 1; the smoke ignores it), BENCH_NICE (nice
# level of the measurement itself, default 0), BENCH_SKIP_PEER=1, PORTCULLIS_BIN (skip the
# cargo build), OHA, GO, BENCH_KEEP=1 (keep the work dir with the server logs),
# BENCH_BASELINE_BIN (an earlier build of portcullis, run beside this one in the rounds and
# small-Pod sections),
# BENCH_ROUNDS and BENCH_SMALL_POD_ROUNDS (rounds of those sections, 5 each), BENCH_ROUNDS_H2=0
# (the rounds and Gatekeeper sections without their HTTP/2 runs), BENCH_ONLY (one section:
# isolation, small-pod, rounds, gatekeeper or instructions), BENCH_GATEKEEPER_ROUNDS (5),
# BENCH_INSTRUCTION_REQUESTS (reviews counted per server and body, 1000), PORTCULLIS_GATOR
# (the gator binary; skips its build), BENCH_SKIP_GATOR=1 (no `gator bench`).
set -euo pipefail
cd "$(dirname "$0")/.."

OHA_VERSION=1.16.0
CACHE="${PORTCULLIS_BENCH_CACHE:-$HOME/.cache/portcullis-bench}"
SMOKE=0
[[ "${1:-}" == "--smoke" ]] && SMOKE=1

say() { echo "[bench] $*" >&2; }

# ---- oha ----
OHA="${OHA:-$CACHE/bin/oha}"
if [[ ! -x "$OHA" ]]; then
  say "installing oha $OHA_VERSION into $CACHE (cargo install, a few minutes on 2 cores)"
  mkdir -p "$CACHE"
  nice -n 19 cargo install --locked --version "$OHA_VERSION" --root "$CACHE" oha >&2
fi

# ---- portcullis ----
if [[ -n "${PORTCULLIS_BIN:-}" ]]; then
  PORTCULLIS="$PORTCULLIS_BIN"
else
  TARGET_DIR="${CARGO_TARGET_DIR:-target}"
  if [[ $SMOKE == 1 ]]; then
    # The debug build `cargo test` already made: the smoke checks the scripts, not figures.
    say "cargo build --locked (debug)"
    nice -n 19 cargo build --locked --bin portcullis >&2
    PORTCULLIS="$TARGET_DIR/debug/portcullis"
  else
    say "cargo build --release --locked"
    nice -n 19 cargo build --release --locked --bin portcullis >&2
    PORTCULLIS="$TARGET_DIR/release/portcullis"
  fi
fi

if [[ $SMOKE == 1 ]]; then
  exec python3 bench/loadbench.py --smoke --portcullis "$PORTCULLIS" --oha "$OHA"
fi

# ---- the Go peer ----
PEER_ARGS=()
NOTES=()
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
if [[ -n "${BENCH_SKIP_PEER:-}" ]]; then
  NOTES+=(--note "Go peer skipped: BENCH_SKIP_PEER is set.")
elif [[ ! -x "$GO" ]]; then
  say "Go not found: the Go peer is skipped"
  NOTES+=(--note "Go peer skipped: no Go toolchain.")
else
  PEER_SRC=bench/peers/go-webhook
  PEER="$(GO="$GO" bench/build-go-peer.sh)"
  PEER_ARGS=(--go-webhook "$PEER")
  CR="$(awk '$1 == "sigs.k8s.io/controller-runtime" {print $2}' "$PEER_SRC/go.mod")"
  PSA="$(awk '$1 == "k8s.io/pod-security-admission" {print $2}' "$PEER_SRC/go.mod")"
  NOTES+=(--note "Go peer: controller-runtime $CR, pod-security-admission $PSA, $("$GO" version | cut -d' ' -f3), GOMAXPROCS default.")
fi

# ---- gator (the Gatekeeper section: a full run, or BENCH_ONLY=gatekeeper) ----
GATOR_ARGS=()
if [[ -z "${BENCH_ONLY:-}" || "${BENCH_ONLY}" == gatekeeper ]]; then
  GATOR="${PORTCULLIS_GATOR:-}"
  if [[ -n "${BENCH_SKIP_GATOR:-}" ]]; then
    NOTES+=(--note "gator bench skipped: BENCH_SKIP_GATOR is set.")
    GATOR=""
  elif [[ -z "$GATOR" && -x "$GO" ]]; then
    GATOR="$(GO="$GO" e2e/build-gator.sh | tail -n 1)"
  elif [[ -z "$GATOR" ]]; then
    say "Go not found: gator bench is skipped"
    NOTES+=(--note "gator bench skipped: no Go toolchain to build gator.")
  fi
  if [[ -n "$GATOR" ]]; then
    GATOR_ARGS=(--gator "$GATOR")
    NOTES+=(--note "gator: $("$GATOR" --version | cut -d' ' -f1-3,7-), GOMAXPROCS default.")
  fi
fi

NOTES+=(--note "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(uname -r), load average before the run: $(cut -d' ' -f1-3 /proc/loadavg); oha $("$OHA" --version | awk '{print $2}') runs on the same cores; $("$PORTCULLIS" --version); date $(date -u +%FT%TZ).")
NOTES+=(--note "Portcullis runs with its defaults (one info log line per decision, to a file; requests no rule wants at debug, not written); the Go peer logs nothing.")

EXTRA_ARGS=()
[[ -n "${BENCH_BASELINE_BIN:-}" ]] && EXTRA_ARGS+=(--baseline "$BENCH_BASELINE_BIN")
[[ -n "${BENCH_ONLY:-}" ]] && EXTRA_ARGS+=(--only "$BENCH_ONLY")

mkdir -p bench/results
nice -n "${BENCH_NICE:-0}" python3 bench/loadbench.py --portcullis "$PORTCULLIS" --oha "$OHA" \
  "${PEER_ARGS[@]}" "${GATOR_ARGS[@]}" "${EXTRA_ARGS[@]}" "${NOTES[@]}" --out bench/results/latest.md
