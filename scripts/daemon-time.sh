#!/usr/bin/env bash
# How long the Vaultaire mount process works on each kind of request before it replies: user-space
# probes on the request handlers (perf probe) and the reply's system call (writev on /dev/fuse) give,
# per request type, the mean time from the handler's start to its reply and the system calls made
# in between, during `tar x` and `rm -rf` of small files. Unlike trace-requests.sh, which times
# requests as the kernel sees them (queueing and task switches included), this is the daemon's own
# share. It reports; it never fails. Usage: scripts/daemon-time.sh [files=2000] [vaultaire binary]
# BENCH_DIR chooses the host filesystem (default /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."

FILES="${1:-2000}"
command -v perf >/dev/null || apt-get install -y -qq --no-install-recommends linux-perf >/dev/null 2>&1 || true
[ -d /sys/kernel/tracing/events/syscalls ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
if ! command -v perf >/dev/null || [ ! -d /sys/kernel/tracing/events/syscalls ]; then
  echo "daemon-time: needs perf and the kernel's syscall tracepoints"; exit 0
fi
PASSTHROUGH=""
source scripts/bench-targets.sh
prepare_workspace daemon-time
BIN="$(readlink -f "${2:-$VAULTAIRE}")"; VAULTAIRE="$BIN"
make_tree "$FILES" "$W/small.tar"

# One probe per request handler: each has a stable C symbol, vaultaire_op_<name> (VaultFUSE/Operations).
OPS="create flush release setattr getxattr lookup getattr unlink write"
perf probe -q -d 'probe_vaultaire*:*' >/dev/null 2>&1
for op in $OPS; do
  perf probe -q -x "$BIN" -a "$op=vaultaire_op_$op" >/dev/null 2>&1 || echo "daemon-time: no probe on vaultaire_op_$op"
done
trap 'perf probe -q -d "probe_vaultaire*:*" >/dev/null 2>&1; remove_workspace' EXIT

mount_target vaultaire "$W/v" || { echo "daemon-time: mount failed"; exit 0; }
PID=$(pgrep -n -f " mount $W/v/back/v ")
events=(-e 'probe_vaultaire*:*')
for s in openat pwrite64 pwritev write writev close getpid mkdir fsync fdatasync; do events+=(-e "syscalls:sys_enter_$s"); done
perf record -q "${events[@]}" -p "$PID" -o "$W/probes.data" >/dev/null 2>&1 &
RECORDER=$!
sleep 1
tar -C "$MNT" -xf "$W/small.tar"
sync -f "$MNT"
rm -rf "$MNT/tree"
sleep 0.5
kill -INT "$RECORDER"; wait "$RECORDER" 2>/dev/null
unmount_target vaultaire

echo "Time to reply per request type — $(date -u +%Y-%m-%d), $(uname -r), $FILES files, host $(findmnt -no FSTYPE -T "$W"), ${2:-vaultaire $(git rev-parse --short HEAD 2>/dev/null)}"
perf script -i "$W/probes.data" 2>/dev/null | python3 -c '
import collections, re, sys
ops = set(sys.argv[1].split())
current, total, count = {}, collections.Counter(), collections.Counter()
calls = collections.defaultdict(collections.Counter)
for line in sys.stdin:
    m = re.match(r"\s*\S+\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+\S+:(\S+):", line)
    if not m: continue
    thread, t, event = m.group(1), float(m.group(2)), m.group(3)
    if event in ops: current[thread] = (event, t); continue
    if thread in current and event.startswith("sys_enter_"):
        op, t0 = current[thread]
        if event == "sys_enter_writev":  # the reply
            total[op] += t - t0; count[op] += 1; del current[thread]
        else:
            calls[op][event[10:]] += 1
for op, n in count.most_common():
    made = ", ".join(f"{c / n:.2f} {s}" for s, c in sorted(calls[op].items())) or "none"
    print(f"    {op:9s} {n:7d}  {1e6 * total[op] / n:7.1f} µs to reply   system calls each: {made}")
' "$OPS"
