#!/usr/bin/env bash
# What each FUSE request costs, from the kernel's own tracepoints (fuse:fuse_request_send/_end):
# for each target, `tar x` of small files and then `rm -rf` of them, with a count, the mean time
# from queueing to reply and the total per request type, and the requests per file. This is how
# docs/PERFORMANCE.md compares Vaultaire's small-file path with the peers'. It reports; it never fails.
# Usage: scripts/trace-requests.sh [files=10000] [targets=vaultaire securefs gocryptfs]
# BENCH_DIR chooses the host filesystem (default /tmp); a tmpfs there leaves the disk out of it.
set -uo pipefail
cd "$(dirname "$0")/.."

FILES="${1:-10000}"; shift $(( $# > 0 ? 1 : 0 ))
TARGETS="${*:-vaultaire securefs gocryptfs}"

scripts/install-deps.sh >/dev/null
for p in perf gocryptfs securefs; do
  command -v "$p" >/dev/null || apt-get install -y -qq --no-install-recommends linux-perf gocryptfs securefs >/dev/null 2>&1 || true
done
[ -d /sys/kernel/tracing/events/fuse ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
if [ ! -d /sys/kernel/tracing/events/fuse ] || ! command -v perf >/dev/null; then
  echo "trace-requests: needs perf and a kernel with FUSE tracepoints (6.15 or later)"; exit 0
fi
PASSTHROUGH=""
source scripts/bench-targets.sh
prepare_workspace trace
make_tree "$FILES" "$W/small.tar"

traced() {  # $1 = output, rest = command
  local out="$1"; shift
  perf record -q -e fuse:fuse_request_send -e fuse:fuse_request_end -a -o "$out" -- "$@" >/dev/null 2>&1
}

summarise() {  # $1 = perf data, $2 = files
  perf script -i "$1" 2>/dev/null | python3 -c '
import collections, re, sys
files = int(sys.argv[1])
sent, count, total = {}, collections.Counter(), collections.Counter()
first = last = None
for line in sys.stdin:
    m = re.search(r"\s(\d+\.\d+):\s+fuse:fuse_request_(send|end):.*?req (\d+)", line)
    if not m: continue
    t, unique = float(m.group(1)), m.group(3)
    first = first if first is not None else t; last = t
    if m.group(2) == "send":
        op = re.search(r"\((FUSE_\w+)\)", line)
        sent[unique] = (t, op.group(1)[5:] if op else "?")
    elif unique in sent:
        t0, op = sent.pop(unique); count[op] += 1; total[op] += t - t0
for op, n in count.most_common():
    print(f"    {op:12s} {n:7d}  {1e6 * total[op] / n:7.1f} µs  {total[op]:6.3f} s")
answered = sum(count.values())
if first is not None:
    print(f"    {answered / files:.1f} answered requests per file, {last - first:.2f} s from first to last")
' "$2"
}

echo "FUSE requests per type — $(date -u +%Y-%m-%d), $(uname -r), $FILES files, host $(findmnt -no FSTYPE -T "$W"), vaultaire $(git rev-parse --short HEAD 2>/dev/null)"
for t in $TARGETS; do
  mount_target "$t" "$W/$t" || { echo "  $t: mount failed"; continue; }
  sync
  traced "$W/tar.data" tar -C "$MNT" -xf "$W/small.tar"
  sync -f "$MNT" 2>/dev/null; sync; echo 3 > /proc/sys/vm/drop_caches
  ls -lR "$MNT/tree" >/dev/null
  traced "$W/rm.data" rm -rf "$MNT/tree"
  unmount_target "$t"
  echo "  $t, tar x:"; summarise "$W/tar.data" "$FILES"
  echo "  $t, rm -rf:"; summarise "$W/rm.data" "$FILES"
  rm -rf "$W/$t" "$W/tar.data" "$W/rm.data"
done
