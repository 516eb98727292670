#!/usr/bin/env bash
# Runs the whole test suite: unit, format, engine, command-line, keychain and mount tests.
# Requires the packages of scripts/install-deps.sh. The Secret Service tests need a real keyring:
# this script runs the suite inside a private D-Bus session with its own gnome-keyring-daemon.
# CI sets VAULTAIRE_REQUIRE_FUSE=1, so a missing /dev/fuse or keyring fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${VAULTAIRE_TEST_SESSION:-}" ]; then
  swift build --build-tests 2>&1 | grep -E "error|warning: |Compiling|Build" | grep -v "^\[" || true
  swift build --build-tests >/dev/null
  exec dbus-run-session -- env VAULTAIRE_TEST_SESSION=1 "$0" "$@"
fi

# Inside the private session: a throwaway keyring in a temporary home.
keyring_home="$(mktemp -d /tmp/vaultaire-keyring.XXXXXX)"
trap 'pkill -f "gnome-keyring-daemon.*$keyring_home" 2>/dev/null || true; rm -rf "$keyring_home"' EXIT
export XDG_DATA_HOME="$keyring_home/data" XDG_RUNTIME_DIR="$keyring_home/run"
mkdir -p "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
head -c 24 /dev/urandom | base64 > "$keyring_home/password"
export VAULTAIRE_TEST_KEYRING_PASSWORD_FILE="$keyring_home/password"
gnome-keyring-daemon --unlock --components=secrets --daemonize < "$keyring_home/password" >/dev/null
export VAULTAIRE_REQUIRE_FUSE="${VAULTAIRE_REQUIRE_FUSE:-0}"
swift test --skip-build "$@"
