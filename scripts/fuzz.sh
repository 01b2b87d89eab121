#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time (`make fuzz`; `make fuzz-smoke` for a
# few seconds each). A crash fails the run: the crash file is printed and copied to
# fuzz/regressions/<target>/, which is replayed at the start of every later run.
#
#   FUZZ_SECONDS   seconds per target (default 20)
#   FUZZ_TARGETS   targets to run (default: review policy patch cel)
#
# Needs cargo-fuzz (installed with `cargo install --locked cargo-fuzz` when missing) and a nightly
# compiler for the sanitizers: `cargo +nightly` when rustup has one, otherwise the stable
# compiler with RUSTC_BOOTSTRAP=1 (said on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-20}"
read -r -a targets <<<"${FUZZ_TARGETS:-review policy patch cel}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz" >&2
  cargo install --locked cargo-fuzz
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  echo "fuzz.sh: no nightly toolchain: using stable with RUSTC_BOOTSTRAP=1" >&2
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi

# Seeds: the fixtures' reviews for the router and patch targets (the patch target takes a
# review's request.object), the fixtures' and examples' policies for the policy target.
seed() {
  local target="$1"
  shift
  mkdir -p "fuzz/corpus/$target"
  local file
  for file in "$@"; do
    [[ -f "$file" ]] && cp "$file" "fuzz/corpus/$target/seed-$(basename "$(dirname "$file")")-$(basename "$file")"
  done
  return 0
}
shopt -s nullglob globstar
seed review tests/fixtures/reviews/*.json tests/fixtures/check/reviews/*.json examples/reviews/*.json
seed patch tests/fixtures/reviews/*.json tests/fixtures/check/reviews/*.json examples/reviews/*.json \
  tests/fixtures/check/*.json
seed policy tests/fixtures/policies/**/*.yaml tests/fixtures/check/policies/*.yaml \
  examples/policies/*.yaml src/engine/builtin.yaml

# The cel target takes an expression (first line) and a JSON document: every expression of
# the policies and CEL fixtures (`expression:`, `messageExpression:`, `expr:`; quoted, plain or
# block scalars joined on one line), each followed by one of the fixtures' reviews in turn.
expressions() {
  awk -v q="'" '
    function flush() { if (block != "") print block; block = ""; inblock = 0 }
    {
      if (inblock) {
        match($0, /^ */)
        if ($0 ~ /^ *$/ || RLENGTH > indent) {
          line = $0; sub(/^ +/, "", line); block = block (block == "" ? "" : " ") line; next
        }
        flush()
      }
      if (match($0, /^[ -]*([A-Za-z]*[Ee]xpression|expr): */)) {
        value = substr($0, RLENGTH + 1)
        match($0, /^[ -]*/); indent = RLENGTH
        if (value ~ /^[|>][-+0-9]*$/) { inblock = 1; block = ""; next }
        # a comment after a quoted value
        if (value ~ ("^[\"" q "].*[\"" q "] +#")) sub("[\"" q "] +#.*$", substr(value, 1, 1), value)
        if (value ~ /^".*"$/) {
          value = substr(value, 2, length(value) - 2); gsub(/\\"/, "\"", value)
        } else if (value ~ ("^" q ".*" q "$")) {
          value = substr(value, 2, length(value) - 2); gsub(q q, q, value)
        }
        if (value != "") print value
      }
    }
    END { flush() }' "$@" | sort -u
}
mkdir -p fuzz/corpus/cel
cel_reviews=(tests/fixtures/reviews/pod-create-compliant.json tests/fixtures/reviews/deployment-update.json
  tests/fixtures/reviews/configmap-delete.json)
n=0
while IFS= read -r expression; do
  review="${cel_reviews[n % ${#cel_reviews[@]}]}"
  { printf '%s\n' "$expression"; cat "$review"; } >"fuzz/corpus/cel/seed-$n"
  n=$((n + 1))
done < <(expressions tests/fixtures/**/*.yaml examples/**/*.yaml bench/fixtures/**/*.yaml \
  src/engine/builtin.yaml)

# Build outside the checkout, so CI's fresh clones reuse the (slow, sanitizer) build.
target_dir="${PORTCULLIS_FUZZ_TARGET_DIR:-$HOME/.cache/portcullis/fuzz-target}"
mkdir -p "$target_dir"

failed=()
summary=()
for target in "${targets[@]}"; do
  "${fuzz[@]}" build --target-dir "$target_dir" "$target"
  regressions=(fuzz/regressions/"$target"/*)
  if ((${#regressions[@]})); then
    echo "fuzz.sh: $target: replaying ${#regressions[@]} regression input(s)"
    if ! "${fuzz[@]}" run --target-dir "$target_dir" "$target" "${regressions[@]}" -- -runs=1; then
      failed+=("$target (regression)")
    fi
  fi
  log="fuzz/artifacts/$target.log"
  mkdir -p "fuzz/artifacts/$target"
  marker=$(mktemp)
  echo "fuzz.sh: $target: fuzzing for ${seconds}s (log: $log)"
  status=0
  "${fuzz[@]}" run --target-dir "$target_dir" "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$log" || true
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  crashes=$(find "fuzz/artifacts/$target" -type f -newer "$marker")
  rm -f "$marker"
  if ((status != 0)) || [[ -n "$crashes" ]]; then
    failed+=("$target")
    grep -A 30 -E 'panicked|ERROR: (libFuzzer|AddressSanitizer)' "$log" | head -n 60 || true
    for crash in $crashes; do
      mkdir -p "fuzz/regressions/$target"
      cp "$crash" "fuzz/regressions/$target/"
      echo "fuzz.sh: $target: crash file $crash (copied to fuzz/regressions/$target/):"
      od -A d -c "$crash" | head -n 40
    done
  fi
  summary+=("$target: ${execs:-?} executions in ${seconds}s")
done

printf 'fuzz.sh: %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crash"
