#!/usr/bin/env bash
# Disk use: the same trees extracted into a plain directory, Vaultaire, gocryptfs and securefs, then
# `du` of each backing directory after unmounting (everything the vault keeps: blobs, index, journal,
# header). Sizes do not depend on the machine's speed, so one run is enough.
# Usage: scripts/bench-disk.sh [small files=20000] [big file MiB=1024]
# BENCH_DIR chooses the host filesystem (default /tmp). Called by scripts/bench.sh; runs alone too.
set -uo pipefail
cd "$(dirname "$0")/.."

SMALL="${1:-20000}"; BIG_MB="${2:-1024}"
TARGETS="${BENCH_DISK_TARGETS:-plain vaultaire gocryptfs securefs}"

scripts/install-deps.sh >/dev/null
for p in gocryptfs securefs; do
  command -v "$p" >/dev/null || apt-get install -y -qq --no-install-recommends gocryptfs securefs >/dev/null 2>&1 || true
done
source scripts/bench-targets.sh
prepare_workspace bench-disk

# The trees, as tarballs so that every target gets the same bytes in the same order.
python3 - "$SMALL" "$W/tiny.tar" <<'PY'
import io, os, random, sys, tarfile
n, out = int(sys.argv[1]), sys.argv[2]
random.seed(29)
with tarfile.open(out, "w") as t:
    for i in range(n):
        data = os.urandom(random.randint(0, 2048))
        info = tarfile.TarInfo(f"tree/d{i // 100:04d}/f{i:06d}"); info.size = len(data)
        t.addfile(info, io.BytesIO(data))
PY
make_tree 10000 "$W/bench.tar"
tar -C /usr -cf "$W/include.tar" include 2>/dev/null
tar -C /usr/share -cf "$W/doc.tar" doc 2>/dev/null
head -c $((BIG_MB * 1024 * 1024)) /dev/urandom > "$W/big"

count_files() { tar -tvf "$1" | grep -c '^-'; }
TREES="tiny bench include doc big"
declare -A LABEL=(
  [tiny]="$SMALL files of 0–2 KiB"
  [bench]="10,000 files of 1–4 KiB (the tar x tree)"
  [include]="/usr/include ($(count_files "$W/include.tar") files)"
  [doc]="/usr/share/doc ($(count_files "$W/doc.tar") files)"
  [big]="one file of $BIG_MB MiB (random)"
)

declare -A DU  # DU[target,tree] = bytes
for tree in $TREES; do
  for t in $TARGETS; do
    d="$W/$t-$tree"
    mount_target "$t" "$d" || { echo "  $t: mount failed" >&2; continue; }
    echo "  $tree: $t" >&2
    if [ "$tree" = big ]; then cp "$W/big" "$MNT/big"; else tar -C "$MNT" -xf "$W/$tree.tar" 2>/dev/null; fi
    unmount_target "$t"
    sync
    DU[$t,$tree]=$(du -s --block-size=1 "$d/back" | cut -f1)
    rm -rf "$d"
  done
done

echo "Disk use — $(date -u +%Y-%m-%d), vaultaire $(git rev-parse --short HEAD 2>/dev/null), host $(findmnt -no FSTYPE -T "$W") ($(stat -f -c %S "$W")-byte blocks)"
python3 - "$TARGETS" "$TREES" "$(for k in "${!DU[@]}"; do echo "$k=${DU[$k]}"; done)" \
  "$(for tr in $TREES; do echo "$tr=${LABEL[$tr]}"; done)" <<'PY'
import sys
targets, trees = sys.argv[1].split(), sys.argv[2].split()
du = {tuple(k.split(",")): int(v) for k, v in (l.split("=") for l in sys.argv[3].splitlines() if l)}
label = dict(l.split("=", 1) for l in sys.argv[4].splitlines() if l)
mb = lambda b: f"{b / 1e6:.1f}"
def ratio(a, b):
    return f"{a / b:.3f}×" if a and b else "–"
print("| tree (du, MB) | " + " | ".join(targets) + " | vaultaire ÷ gocryptfs | vaultaire ÷ securefs | vaultaire ÷ plain |")
print("|---|" + "---|" * (len(targets) + 3))
for tr in trees:
    row = [du.get((t, tr)) for t in targets]
    v = du.get(("vaultaire", tr))
    print(f"| {label[tr]} | " + " | ".join(mb(x) if x else "–" for x in row) + " | "
          + " | ".join(ratio(v, du.get((p, tr))) for p in ("gocryptfs", "securefs", "plain")) + " |")
print("\nRatios below 1 mean Vaultaire takes less disk.")
PY
