#!/usr/bin/env bash
# Builds the Go peer (bench/peers/go-webhook) from the committed go.mod/go.sum and prints the
# binary's path on stdout (progress goes to stderr). Used by bench/run.sh and `make e2e-latency`.
#
# The binary lives in $CACHE/go-webhook/<hash of go.mod, go.sum, *.go and `go version`>/ and is
# reused when present; CACHE = ${PORTCULLIS_BENCH_CACHE:-$HOME/.cache/portcullis-bench}. The
# build runs under `nice -n 19`. GO names the toolchain (default: `go` on PATH, else
# /usr/local/go/bin/go). Exits 3, printing nothing on stdout, when there is no Go toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${PORTCULLIS_BENCH_CACHE:-$HOME/.cache/portcullis-bench}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
PEER_SRC=bench/peers/go-webhook

if [[ ! -x "$GO" ]]; then
  echo "[go-peer] Go not found (GO=$GO)" >&2
  exit 3
fi

KEY="$( { cat "$PEER_SRC/go.mod" "$PEER_SRC/go.sum" "$PEER_SRC"/*.go; "$GO" version; } \
        | sha256sum | cut -c1-16)"
PEER="$CACHE/go-webhook/$KEY/go-webhook"
if [[ ! -x "$PEER" ]]; then
  echo "[go-peer] building the Go peer into $PEER" >&2
  mkdir -p "$(dirname "$PEER")"
  (cd "$PEER_SRC" && nice -n 19 "$GO" build -trimpath -mod=readonly -ldflags='-s -w' \
     -o "$PEER.tmp" .) >&2
  mv "$PEER.tmp" "$PEER"
fi
echo "$PEER"
