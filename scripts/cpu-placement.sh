#!/usr/bin/env bash
# How much of a small-file workload's time is the CPUs' hand-offs rather than work: `tar x` and
# `rm -rf` of small files on each target, with the mount process and the workload left to the
# scheduler ("free"), pinned together to one CPU ("same") and pinned to two different CPUs
# ("apart"). Each request is a hand-off from the program to the mount and back; on one CPU it is a
# task switch, across CPUs a wake-up of the other one. It reports medians; it never fails.
# Usage: scripts/cpu-placement.sh [files=2000] [rounds=3] [targets="vaultaire securefs gocryptfs"]
# BENCH_DIR chooses the host filesystem (default /tmp). Needs two CPUs or more.
set -uo pipefail
cd "$(dirname "$0")/.."

FILES="${1:-2000}"; ROUNDS="${2:-3}"; TARGETS="${3:-vaultaire securefs gocryptfs}"
[ "$(nproc)" -ge 2 ] || { echo "cpu-placement: needs two CPUs"; exit 0; }
PASSTHROUGH=""
source scripts/bench-targets.sh
prepare_workspace cpu-placement
make_tree "$FILES" "$W/small.tar"

declare -A TAR RM
for round in $(seq "$ROUNDS"); do
  for t in $TARGETS; do
    for placement in free same apart; do
      d="$W/$t-$placement-$round"
      mount_target "$t" "$d"
      pid=$(pgrep -n -f -- "$d/back") || { echo "cpu-placement: $t did not mount"; continue; }
      run=()
      case $placement in
        same) taskset -a -p -c 0 "$pid" >/dev/null; run=(taskset -c 0) ;;
        apart) taskset -a -p -c 1 "$pid" >/dev/null; run=(taskset -c 0) ;;
      esac
      sync; sleep 2
      s=$(now); "${run[@]}" tar -C "$MNT" -xf "$W/small.tar"; e=$(now)
      sync; sleep 2
      s2=$(now); "${run[@]}" rm -rf "$MNT/tree"; e2=$(now)
      TAR[$t-$placement]+=" $(elapsed $s $e)"; RM[$t-$placement]+=" $(elapsed $s2 $e2)"
      unmount_target "$t"
      rm -rf "$d"
    done
  done
done

echo "CPU placement — $(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r), $FILES files, host $(findmnt -no FSTYPE -T "$W"), medians of $ROUNDS"
echo "| target | placement | tar x files/s | rm -rf s |"
echo "|---|---|---|---|"
for t in $TARGETS; do
  for placement in free same apart; do
    python3 - "$t" "$placement" "$FILES" "${TAR[$t-$placement]:-}" "${RM[$t-$placement]:-}" <<'PY'
import statistics, sys
t, placement, files, tars, rms = sys.argv[1:6]
if tars.split():
    print(f"| {t} | {placement} | {int(files) / statistics.median(map(float, tars.split())):.0f} | {statistics.median(map(float, rms.split())):.3f} |")
PY
  done
done
