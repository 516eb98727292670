#!/usr/bin/env bash
# The io_uring lane: the tests of FUSE over io_uring (IoUringTests, the ThroughIoUring variants, the C
# checks of the transport) with the fuse module's enable_uring switched on for the run and put back
# after it. Nothing may skip (VAULTAIRE_REQUIRE_URING=1): a kernel without the parameter fails, and so
# does a mount the rings did not serve, since each such test's unmount checks the rings' activity.
# Needs root on Linux 6.14+. Usage: scripts/test-io-uring.sh
set -euo pipefail
cd "$(dirname "$0")/.."

parameter=/sys/module/fuse/parameters/enable_uring
if [ ! -w "$parameter" ]; then
  echo "test-io-uring: $parameter is missing or not writable: FUSE over io_uring cannot be tested" \
       "(root, Linux 6.14+)" >&2
  exit 1
fi
saved="$(cat "$parameter")"
log="$(mktemp /tmp/vaultaire-uring-lane.XXXXXX)"
trap 'echo "$saved" > "$parameter"; rm -f "$log"' EXIT
echo Y > "$parameter"
VAULTAIRE_REQUIRE_FUSE=1 VAULTAIRE_REQUIRE_URING=1 \
  scripts/test.sh --filter 'IoUringTests|ThroughIoUring|RingBoundsTests' 2>&1 | tee "$log"
# Every test of the lane ran and passed: none skipped, none filtered away.
if grep -q "Test Case '.*' skipped" "$log" || ! grep -q "Test Case 'IoUringTests\..*' passed" "$log" \
   || ! grep -q "ThroughIoUring' passed" "$log" || ! grep -q "Test Case 'RingBoundsTests\..*' passed" "$log"; then
  echo "test-io-uring: not every test of the lane ran" >&2
  exit 1
fi
