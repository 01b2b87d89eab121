#!/usr/bin/env bash
# Build Helm from the pinned Go module under e2e/helm/ into a cache folder outside git
# (e2e/build-go-tool.sh). The chart tests (tests/helm.rs) and `make helm` use it. As Helm's own
# Makefile: static, stripped, an honest `helm version`. The last line on stdout is the binary.
set -euo pipefail
HELM_VERSION=v4.3.2
exec "$(dirname "$0")/build-go-tool.sh" helm "${HELM_VERSION}" helm.sh/helm/v4 \
  helm.sh/helm/v4/cmd/helm \
  "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
