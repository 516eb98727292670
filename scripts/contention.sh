#!/usr/bin/env bash
# Metadata under a syncing neighbour: `stat` of every file of a 10,000-file tree, alone and while
# another process fsyncs a file in a loop, on Vaultaire and the peers. A filesystem that syncs while
# holding the lock every lookup needs makes the second far slower than the first.
# It reports; it never fails CI. Usage: scripts/contention.sh [runs=3] [files=10000]
# BENCH_DIR chooses the host filesystem (default /tmp); BENCH_TARGETS the targets.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"; FILES="${2:-10000}"
TARGETS="${BENCH_TARGETS:-passthrough vaultaire gocryptfs securefs}"
scripts/install-deps.sh >/dev/null
for p in gocryptfs securefs; do command -v "$p" >/dev/null || apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 || true; done
source scripts/bench-targets.sh
prepare_workspace contention
PASSTHROUGH="$W/passthrough"
gcc -O2 -Wall /usr/share/doc/libfuse3-dev/examples/passthrough.c -I/usr/share/doc/libfuse3-dev/examples \
  $(pkg-config --cflags --libs fuse3) -o "$PASSTHROUGH" 2>/dev/null || PASSTHROUGH=""
make_tree "$FILES" "$W/small.tar"

# Seconds to stat every file, with the kernel's cached names and attributes dropped first, so that
# each stat is a lookup the filesystem answers.
stat_all() {
  sync; echo 2 > /proc/sys/vm/drop_caches
  local s e; s=$(now)
  find "$MNT/tree" -type f -print0 | xargs -0 stat -c %s > /dev/null
  e=$(now); elapsed "$s" "$e"
}

declare -A R
for r in $(seq 1 "$RUNS"); do
  for t in $TARGETS; do
    d="$W/$t-$r"
    mount_target "$t" "$d" || { echo "  $t: mount failed"; continue; }
    mkdir -p "$MNT/tree"; tar -C "$MNT/tree" -xf "$W/small.tar"
    R[$t,alone,$r]=$(stat_all)
    python3 -c "
import os, time
fd = os.open('$MNT/syncing', os.O_WRONLY | os.O_CREAT, 0o600)
end = time.time() + 600
while time.time() < end:
    os.pwrite(fd, os.urandom(4096), 0); os.fsync(fd)
" & syncer=$!
    sleep 0.5
    R[$t,syncing,$r]=$(stat_all)
    kill $syncer; wait $syncer 2>/dev/null
    unmount_target "$t" "$d"
  done
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "stat of $FILES files, seconds (median of $RUNS), alone and beside an fsync loop"
printf '%-14s %10s %10s %8s\n' target alone syncing ratio
for t in $TARGETS; do
  a=(); s=()
  for r in $(seq 1 "$RUNS"); do [ -n "${R[$t,alone,$r]:-}" ] && a+=("${R[$t,alone,$r]}") && s+=("${R[$t,syncing,$r]}"); done
  [ ${#a[@]} -gt 0 ] || continue
  ma=$(median "${a[@]}"); ms=$(median "${s[@]}")
  printf '%-14s %10s %10s %7.2fx\n' "$t" "$ma" "$ms" "$(python3 -c "print($ms/$ma)")"
done
