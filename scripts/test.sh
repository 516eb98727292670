#!/usr/bin/env bash
# Runs the whole test suite: unit, format, engine, command-line and mount tests.
# Requires the packages of scripts/install-deps.sh. CI sets VAULTAIRE_REQUIRE_FUSE=1 so a missing
# /dev/fuse fails the mount tests instead of skipping them.
set -euo pipefail
cd "$(dirname "$0")/.."

export VAULTAIRE_REQUIRE_FUSE="${VAULTAIRE_REQUIRE_FUSE:-0}"
swift build --build-tests 2>&1 | grep -v "^\[" || true
swift build --build-tests >/dev/null
exec swift test --skip-build "$@"
