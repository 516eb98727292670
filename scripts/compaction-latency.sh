#!/usr/bin/env bash
# The longest wait of a request while the index is compacted beside it. A vault of FILES files is
# filled through the engine (scripts/bench.sh's scale part does the same), mounted, and a probe creates
# CREATES files one at a time in a new directory, timing each create and close; it runs once with
# compactions forced every 2 MiB of journal (VAULTAIRE_TEST_COMPACTION_BYTES; each rewrites the whole
# snapshot) and once without. Reports; never fails.
# Usage: scripts/compaction-latency.sh [files=1000000] [creates=20000] [vault directory to reuse]
set -u
FILES="${1:-1000000}"; CREATES="${2:-20000}"; REUSE="${3:-}"
cd "$(dirname "$0")/.."
swift build -c release >/dev/null 2>&1 || { echo "build failed"; exit 0; }
BIN=.build/release
W=$(mktemp -d /tmp/vaultaire-compaction.XXXXXX)
# A vault to reuse must remember its key in the file keychain of the caller's XDG_DATA_HOME.
[ -n "$REUSE" ] || export XDG_DATA_HOME="$W/xdg"
export VAULTAIRE_KEYCHAIN=file VAULTAIRE_ALLOW_WEAK_KDF=1
mkdir -m 700 -p "$W/xdg" "$W/mnt"
trap '"$BIN/vaultaire" unmount "$W/mnt" >/dev/null 2>&1; rm -rf "$W"' EXIT
printf 'compaction-bench' > "$W/pw"
V="$W/v"
if [ -n "$REUSE" ]; then V="$REUSE"; else
  "$BIN/vaultaire" init "$V" --passphrase-file "$W/pw" --kdf-iterations 1000 --recovery-iterations 1000 \
    --recovery-phrase-out "$W/phrase" --remember >/dev/null 2>&1
  "$BIN/vaultaire-populate" "$V" "$FILES" $((FILES / 100)) >/dev/null
fi
probe() {  # $1: label
  python3 - "$W/mnt/probe-$(date +%s%N)" "$CREATES" "$V/index/snapshot" "$1" <<'PY'
import os, sys, time
d, n, snap, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.mkdir(d)
waits, snapshots, last = [], 0, os.stat(snap).st_ino
for i in range(n):
    t = time.perf_counter()
    fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    os.close(fd)
    waits.append(time.perf_counter() - t)
    if i % 50 == 0:
        ino = os.stat(snap).st_ino
        if ino != last: snapshots, last = snapshots + 1, ino
waits.sort()
q = lambda f: waits[min(len(waits) - 1, int(f * len(waits)))] * 1000
print(f"| {label} | {snapshots} | {q(0.5):.3f} | {q(0.999):.3f} | {waits[-1]*1000:.1f} |")
PY
}
echo "Requests beside compactions: $CREATES creates into a vault of $FILES files"
echo
echo "| run | snapshots written meanwhile | median ms | 99.9th percentile ms | longest ms |"
echo "|---|---|---|---|---|"
"$BIN/vaultaire" mount "$V" "$W/mnt" >/dev/null 2>&1 && probe "no compaction"; "$BIN/vaultaire" unmount "$W/mnt" >/dev/null 2>&1
VAULTAIRE_TEST_COMPACTION_BYTES=$((2 << 20)) "$BIN/vaultaire" mount "$V" "$W/mnt" >/dev/null 2>&1 && probe "compacting every 2 MiB"
"$BIN/vaultaire" unmount "$W/mnt" >/dev/null 2>&1
