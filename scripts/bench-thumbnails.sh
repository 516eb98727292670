#!/usr/bin/env bash
# Thumbnails' cost on the write path it follows (issue 25): `cp` of N photo-sized JPEGs (default 500,
# about 3 MB each, made here with the vips command) into a fresh mount, once with --no-thumbnails and
# once with thumbnails, in the same run; then how long until every thumbnail is there, the rate, and
# the daemon's peak RSS (VmHWM) in each run; ROUNDS rounds (default 3), the order of the two swapped
# every round, medians reported. Needs root (FUSE) and libvips-tools.
#   scripts/bench-thumbnails.sh [N] [ROUNDS]    (VAULTAIRE=path/to/vaultaire to pick a build)
set -euo pipefail
count="${1:-500}"
rounds="${2:-3}"
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${VAULTAIRE:-$here/.build/release/vaultaire}"
[ -x "$bin" ] || bin="$here/.build/debug/vaultaire"
[ -x "$bin" ] || { echo "bench-thumbnails: build first (swift build -c release)" >&2; exit 1; }
command -v vips > /dev/null || { echo "bench-thumbnails: needs the vips command (libvips-tools)" >&2; exit 1; }
work="$(mktemp -d /tmp/vaultaire-bench-thumbs.XXXXXX)"
export HOME="$work" VAULTAIRE_ALLOW_WEAK_KDF=1 VAULTAIRE_KEYCHAIN=file
daemon=""
cleanup() {
  if mountpoint -q "$work/mnt" 2> /dev/null; then fusermount3 -u "$work/mnt" || fusermount3 -uz "$work/mnt"; fi
  [ -z "$daemon" ] || wait "$daemon" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Ten distinct photo-like sources (noise per band over a smooth gradient, Q 85), copied to N names.
mkdir -p "$work/src" "$work/mnt"
for i in $(seq 0 9); do
  for band in r g b; do
    vips gaussnoise "$work/$band.v" 4000 3000 --sigma 8 --seed $((i * 3 + ${#band})) 2> /dev/null \
      || vips gaussnoise "$work/$band.v" 4000 3000 --sigma 8
  done
  vips bandjoin "$work/r.v $work/g.v $work/b.v" "$work/rgb.v"
  vips cast "$work/rgb.v" "$work/u.v" uchar
  vips copy "$work/u.v" "$work/p.v" --interpretation srgb
  vips jpegsave "$work/p.v" "$work/base$i.jpg" --Q 85
  rm -f "$work"/*.v
done
for n in $(seq 1 "$count"); do ln "$work/base$((n % 10)).jpg" "$work/src/photo$n.jpg"; done
bytes=$(cat "$work"/base*.jpg | wc -c)
echo "sources: $count JPEGs of 4000×3000, $((bytes / 10 / 1024)) KiB each on average"

printf 'bench pass\n' > "$work/pw"
now() { date +%s.%N; }
run() { # label, mount options…
  local label="$1"; shift
  rm -rf "$work/vault" "$work/phrase"
  "$bin" init "$work/vault" --passphrase-file "$work/pw" --kdf-iterations 1000 --recovery-iterations 1000 \
    --recovery-phrase-out "$work/phrase" > /dev/null 2>&1
  "$bin" mount "$work/vault" "$work/mnt" --passphrase-file "$work/pw" -f "$@" 2> "$work/$label.log" &
  daemon=$!
  for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
  sync
  local start end done_at made
  start=$(now)
  cp "$work"/src/*.jpg "$work/mnt/"
  end=$(now)
  made=0
  if [ "$label" = thumbnails ]; then
    for _ in $(seq 6000); do  # at most 10 minutes
      made=$(find "$work/vault/thumbs" -type f 2> /dev/null | wc -l)
      [ "$made" -ge "$count" ] && break
      sleep 0.1
    done
  fi
  done_at=$(now)
  local rss
  rss=$(awk '/VmHWM/ { print $2 }' "/proc/$daemon/status")
  fusermount3 -u "$work/mnt"
  wait "$daemon"
  daemon=""
  awk -v l="$label" -v c="$count" -v s="$start" -v e="$end" -v d="$done_at" -v r="$rss" -v m="$made" 'BEGIN {
    printf "%-14s cp %.2f s", l, e - s
    if (m > 0) printf ", all %d thumbnails %.2f s after cp began (%.1f thumbnails/s)", m, d - s, m / (d - s)
    printf ", daemon peak RSS %d MiB\n", r / 1024 }'
  awk -v l="$label" -v s="$start" -v e="$end" -v d="$done_at" -v r="$rss" -v m="$made" \
    'BEGIN { print l, e - s, (m > 0 ? m / (d - s) : 0), r / 1024 }' >> "$work/times"
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run no-thumbnails --no-thumbnails; run thumbnails
  else run thumbnails; run no-thumbnails --no-thumbnails; fi
done
python3 - "$work/times" "$rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(label, column):
    return statistics.median(float(r[column]) for r in rows if r[0] == label)
peak = lambda label: max(float(r[3]) for r in rows if r[0] == label)
print(f"medians of {sys.argv[2]} rounds: cp {med('no-thumbnails', 1):.2f} s without thumbnails, {med('thumbnails', 1):.2f} s with"
      f" ({med('thumbnails', 1) / med('no-thumbnails', 1):.2f}×); {med('thumbnails', 2):.1f} thumbnails/s;"
      f" daemon peak RSS at most {peak('no-thumbnails'):.0f} MiB without, {peak('thumbnails'):.0f} MiB with")
PY
