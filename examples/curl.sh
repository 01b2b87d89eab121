#!/usr/bin/env bash
# Send the example AdmissionReviews to a running Portcullis, the way the
# kube-apiserver would, and show the responses.
#
#   portcullis serve &            # no TLS flags: ephemeral localhost cert,
#                                 # CA written to ${TMPDIR:-/tmp}/portcullis-ca.crt
#   examples/curl.sh              # every examples/reviews/*.json
#   examples/curl.sh examples/reviews/pod-create-privileged.json
#
# Environment:
#   PORTCULLIS_URL  base URL of the webhook      (default https://localhost:8443)
#   PORTCULLIS_CA   CA bundle to verify it with  (default ${TMPDIR:-/tmp}/portcullis-ca.crt,
#                   where `portcullis serve` writes its ephemeral CA)
#
# Exits non-zero if any request fails at the HTTP level (connection error or a
# non-2xx status). A denial is not a failure: it is a 200 with allowed=false.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base="${PORTCULLIS_URL:-https://localhost:8443}"
base="${base%/}"
ca="${PORTCULLIS_CA:-${TMPDIR:-/tmp}/portcullis-ca.crt}"

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  files=("$here"/reviews/*.json)
fi

curl_tls=()
if [[ "$base" == https://* ]]; then
  if [[ ! -r "$ca" ]]; then
    echo "curl.sh: CA file '$ca' not readable; start 'portcullis serve' first or set PORTCULLIS_CA" >&2
    exit 2
  fi
  curl_tls=(--cacert "$ca")
fi

# Pretty-print JSON from stdin with jq if present, else python3, else as is.
pretty() {
  if command -v jq >/dev/null 2>&1; then
    jq .
  elif command -v python3 >/dev/null 2>&1; then
    python3 -m json.tool
  else
    cat
  fi
}

# Print response.patch (base64-encoded JSONPatch) decoded, if there is one.
show_patch() {
  local body="$1" patch ptype
  if command -v jq >/dev/null 2>&1; then
    patch="$(jq -r '.response.patch // empty' "$body")"
    ptype="$(jq -r '.response.patchType // "unset"' "$body")"
  else
    patch="$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("response") or {}).get("patch") or "")' "$body")"
    ptype="$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("response") or {}).get("patchType") or "unset")' "$body")"
  fi
  if [[ -z "$patch" ]]; then
    echo "-- no patch"
    return
  fi
  echo "-- decoded patch (patchType: $ptype):"
  printf '%s' "$patch" | base64 -d | pretty
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

failures=0
for file in "${files[@]}"; do
  for endpoint in validate mutate; do
    echo "=== POST $base/$endpoint  <  ${file#"$here"/}"
    body="$tmp/body.json"
    if ! code="$(curl -sS "${curl_tls[@]}" \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json' \
        --data-binary "@$file" \
        -o "$body" -w '%{http_code}' \
        "$base/$endpoint")"; then
      echo "!!! curl failed" >&2
      failures=$((failures + 1))
      continue
    fi
    echo "-- HTTP $code"
    if [[ "$code" != 2?? ]]; then
      cat "$body"; echo
      failures=$((failures + 1))
      continue
    fi
    pretty <"$body" || cat "$body"
    if [[ "$endpoint" == mutate ]]; then
      show_patch "$body"
    fi
    echo
  done
done

if [[ $failures -gt 0 ]]; then
  echo "curl.sh: $failures request(s) failed" >&2
  exit 1
fi
