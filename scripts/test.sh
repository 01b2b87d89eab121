#!/usr/bin/env bash
# The README's test command (`make test`): every test, end-to-end included.
#
# The end-to-end tests need kube-apiserver, kubectl and etcd built from Go modules
# (e2e/build-controlplane.sh, cached in ~/.cache/portcullis-e2e), at v1.37.2 and at the older
# v1.30.14 (about 35 s more test time warm; e2e/README.md), and the chart tests (tests/helm.rs)
# need Helm, built the same way (e2e/build-helm.sh). Without Go they are skipped with a message,
# except under CI=true, where a missing toolchain is an error.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v go >/dev/null 2>&1 || [[ -x /usr/local/go/bin/go ]]; then
  PORTCULLIS_E2E_BIN="$(e2e/build-controlplane.sh | tail -n 1)"
  PORTCULLIS_E2E_BIN_OLD="$(e2e/build-controlplane.sh "${E2E_OLD_VERSION:-v1.30.14}" | tail -n 1)"
  PORTCULLIS_HELM="$(e2e/build-helm.sh | tail -n 1)"
  export PORTCULLIS_E2E_BIN PORTCULLIS_E2E_BIN_OLD PORTCULLIS_HELM
  # Gatekeeper's gator, built the same way (e2e/build-gator.sh), for tests/gatekeeper_gator.rs.
  PORTCULLIS_GATOR="$(e2e/build-gator.sh | tail -n 1)"
  export PORTCULLIS_GATOR
elif [[ -n "${CI:-}" ]]; then
  echo "test.sh: Go is required under CI (end-to-end and conformance tests build from Go modules)" >&2
  exit 1
else
  echo "test.sh: Go not found: the end-to-end and chart tests will be skipped" >&2
fi

cargo test --locked --all-targets
cargo test --locked --doc
