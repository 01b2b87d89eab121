#!/usr/bin/env bash
# Build gator, OPA Gatekeeper's authoring CLI (`gator verify`, `gator test`), from the pinned
# Go module under e2e/gator/ into a cache folder outside git (e2e/build-go-tool.sh). The
# Gatekeeper differential tests (tests/gatekeeper_gator.rs) and `make gator` use it. As
# Gatekeeper's own build: static, with the release version in pkg/version (`gator --version`);
# stripped. The last line on stdout is the binary.
set -euo pipefail
GATEKEEPER_VERSION=v3.23.1
exec "$(dirname "$0")/build-go-tool.sh" gator "${GATEKEEPER_VERSION}" \
  github.com/open-policy-agent/gatekeeper/v3 \
  github.com/open-policy-agent/gatekeeper/v3/cmd/gator \
  "-s -w -X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=${GATEKEEPER_VERSION}"
