#!/usr/bin/env bash
# Side-by-side benchmark: Vaultaire against gocryptfs, securefs and cryfs, the libfuse passthrough
# example (the cost of FUSE alone) and a plain directory, on this machine, in one run.
# Prints one table of medians with ratios against the best peer and against passthrough.
# It reports; it never fails CI. Usage: scripts/bench.sh [runs=3] [seq MiB=1024] [small files=10000] [scale files=100000]
# BENCH_DIR chooses the host filesystem (default /tmp); BENCH_RAW=file appends each run's figures there.
set -uo pipefail
cd "$(dirname "$0")/.."

RUNS="${1:-3}"; SEQ_MB="${2:-1024}"; SMALL="${3:-10000}"; SCALE="${4:-100000}"
# vaultaire-nx: Vaultaire mounted with --no-xattrs (securefs has no extended attributes on Linux).
# vaultaire-uring: Vaultaire served through FUSE over io_uring, which this script turns on for that
# target's runs only (the fuse module's enable_uring; Linux 6.14+) — left out where the kernel lacks it.
TARGETS="${BENCH_TARGETS:-plain passthrough vaultaire vaultaire-nx vaultaire-uring gocryptfs securefs cryfs}"

scripts/install-deps.sh >/dev/null
missing=()
for p in gocryptfs securefs cryfs fio; do command -v "$p" >/dev/null || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends gocryptfs securefs cryfs fio >/dev/null 2>&1 || true
fi
# The workspace, the small-file tree and mount_target / unmount_target.
source scripts/bench-targets.sh
prepare_workspace bench

# The libfuse passthrough example, compiled from Debian's copy.
PASSTHROUGH="$W/passthrough"
gcc -O2 -Wall /usr/share/doc/libfuse3-dev/examples/passthrough.c -I/usr/share/doc/libfuse3-dev/examples \
  $(pkg-config --cflags --libs fuse3) -o "$PASSTHROUGH" 2>/dev/null || PASSTHROUGH=""

make_tree "$SMALL" "$W/small.tar"

# MB/s for $SEQ_MB MiB moved between times $1 and $2.
seq_rate() { python3 -c "print(f'{$SEQ_MB*1.048576/($2-$1):.0f}')"; }

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }

# ext4 skips inodes freed in the last few seconds (longer while their table blocks are dirty) when it
# allocates new ones, and that scan made whichever target ran right after another's `rm -rf` create
# files several times slower. Writing everything back and waiting it out gives each target the same start.
settle() { sync; sleep 6; }

declare -A R  # R[target,workload,run] = value
run_target() {  # $1 target, $2 run
  local t="$1" r="$2" d="$W/$1-$2" s e
  settle
  mount_target "$t" "$d" || { echo "  $t: mount failed"; return; }
  s=$(now); dd if=/dev/zero of="$MNT/seq" bs=1M count="$SEQ_MB" conv=fsync status=none; e=$(now)
  R[$t,seqwrite,$r]=$(seq_rate $s $e)
  drop_caches
  s=$(now); dd if="$MNT/seq" of=/dev/null bs=1M status=none; e=$(now)
  R[$t,seqread,$r]=$(seq_rate $s $e)
  # The same read with the backing files already in the host's page cache (the mount's own cache
  # still dropped): what the FUSE path and the cipher cost, without the disk's moods.
  drop_caches
  find "$d/back" -type f -exec cat {} + > /dev/null
  s=$(now); dd if="$MNT/seq" of=/dev/null bs=1M status=none; e=$(now)
  R[$t,seqreadwarm,$r]=$(seq_rate $s $e)
  rm -f "$MNT/seq"
  for rw in randread randwrite; do
    R[$t,$rw,$r]=$(cd "$MNT" && fio --name=r --rw=$rw --bs=4k --size=256m --runtime=8 --time_based --ioengine=psync \
      --filename=fio.dat --output-format=terse --terse-version=3 2>/dev/null \
      | awk -F';' -v rw=$rw '{ print (rw=="randread") ? $8 : $49 }')
  done
  rm -f "$MNT/fio.dat"
  settle
  s=$(now); tar -C "$MNT" -xf "$W/small.tar" 2>"$W/tar-errors"; sync -f "$MNT/tree" 2>/dev/null; e=$(now)
  # passthrough fails every utime; one line per target instead of ten thousand.
  [ -s "$W/tar-errors" ] && echo "  $t: tar reported $(grep -c . "$W/tar-errors") errors, first: $(head -1 "$W/tar-errors")"
  R[$t,tarx,$r]=$(python3 -c "print(f'{$SMALL/($e-$s):.0f}')")
  drop_caches
  s=$(now); ls -lR "$MNT/tree" > /dev/null; e=$(now); R[$t,lslr,$r]=$(elapsed $s $e)
  s=$(now); find "$MNT/tree" -printf '%s %m %T@\n' > /dev/null; e=$(now); R[$t,statall,$r]=$(elapsed $s $e)
  s=$(now); rm -rf "$MNT/tree"; e=$(now); R[$t,rmrf,$r]=$(elapsed $s $e)
  unmount_target "$t"
  rm -rf "$d"
}

echo "Vaultaire benchmark — $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -r), runs=$RUNS, seq=${SEQ_MB} MiB, small files=$SMALL"
dev=$(findmnt -no SOURCE -T "$W"); fstype=$(findmnt -no FSTYPE -T "$W")
journal=""; [ "$fstype" = ext4 ] && { [ "$(cat /sys/fs/ext4/"$(basename "$dev")"/journal_task 2>/dev/null)" = "<none>" ] && journal=" (no journal)" || journal=" (journaled)"; }
echo "host filesystem: $fstype$journal on $dev"
if [ -n "$URING_FOUND" ]; then
  echo "FUSE over io_uring: in this kernel, fuse.enable_uring=$URING_FOUND as found (what the vaultaire and vaultaire-nx targets get); on for vaultaire-uring's runs"
else
  TARGETS=$(echo " $TARGETS " | sed 's/ vaultaire-uring / /'); echo "FUSE over io_uring: not in this kernel (or not switchable here); no vaultaire-uring target"
fi
echo "versions: vaultaire $(git rev-parse --short HEAD 2>/dev/null), $(gocryptfs -version 2>/dev/null | head -1 | cut -d';' -f1), securefs $(securefs version 2>/dev/null | head -1 | awk '{print $NF}'), $(cryfs --version 2>/dev/null | head -1), libfuse $(pkg-config --modversion fuse3)"
# Each run starts the list one target later, so no target always follows the same neighbour.
rotated() {  # $1 = run number
  local list=($TARGETS) n k
  n=${#list[@]}
  for k in $(seq 0 $((n - 1))); do printf '%s ' "${list[$(( (k + $1 - 1) % n ))]}"; done
}
for r in $(seq 1 "$RUNS"); do
  for t in $(rotated "$r"); do
    [ "$t" = passthrough ] && [ -z "$PASSTHROUGH" ] && continue
    command -v "$t" >/dev/null || [ "$t" = plain ] || [ "$t" = passthrough ] || [ "${t%%-*}" = vaultaire ] || continue
    echo "  run $r: $t" >&2
    run_target "$t" "$r"
  done
done

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:] if x]; print(f'{statistics.median(v):.6g}' if v else '')" "$@"; }
declare -A M
WORK="seqwrite seqread seqreadwarm randread randwrite tarx lslr statall rmrf"
for t in $TARGETS; do for w in $WORK; do
  vals=(); for r in $(seq 1 "$RUNS"); do vals+=("${R[$t,$w,$r]:-}"); done
  M[$t,$w]=$(median "${vals[@]}")
  # Each run's figure too, for whoever wants the spread behind a median.
  [ -n "${BENCH_RAW:-}" ] && echo "$t $w ${vals[*]}" >> "$BENCH_RAW"
done; done

python3 - "$TARGETS" "$(for t in $TARGETS; do for w in $WORK; do printf '%s,%s=%s\n' "$t" "$w" "${M[$t,$w]}"; done; done)" <<'PY'
import sys
targets = sys.argv[1].split()
m = {}
for line in sys.argv[2].splitlines():
    k, v = line.split("=")
    m[tuple(k.split(","))] = float(v) if v else None
work = [("seqwrite", "seq write MB/s", True), ("seqread", "seq read MB/s (cold)", True),
        ("seqreadwarm", "seq read MB/s (host-cached)", True), ("randread", "rand 4K read IOPS", True),
        ("randwrite", "rand 4K write IOPS", True), ("tarx", "tar x files/s", True), ("lslr", "ls -lR s", False),
        ("statall", "stat all s", False), ("rmrf", "rm -rf s", False)]
peers = [t for t in ("gocryptfs", "securefs") if t in targets]
# Every Vaultaire variant against the best peer; the default and the io_uring mount against passthrough.
to_peer = [t for t in targets if t.startswith("vaultaire")]
to_passthrough = [t for t in ("vaultaire", "vaultaire-uring") if t in targets]
print("| workload | " + " | ".join(targets) + " | " + " | ".join(f"{t} ÷ best peer" for t in to_peer) + " | "
      + " | ".join(f"{t} ÷ passthrough" for t in to_passthrough) + " |")
print("|---|" + "---|" * (len(targets) + len(to_peer) + len(to_passthrough)))
for key, label, higher in work:
    row = [m.get((t, key)) for t in targets]
    pv = [m.get((p, key)) for p in peers if m.get((p, key))]
    best = (max(pv) if higher else min(pv)) if pv else None
    pt = m.get(("passthrough", key))
    def ratio(a, b):
        if not a or not b: return "–"
        return f"{(a / b if higher else b / a):.2f}×"
    print(f"| {label} | " + " | ".join("–" if x is None else f"{x:g}" for x in row) + " | "
          + " | ".join(ratio(m.get((t, key)), best) for t in to_peer) + " | "
          + " | ".join(ratio(m.get((t, key)), pt) for t in to_passthrough) + " |")
print("\nRatios above 1 mean Vaultaire is better (for times: faster).")
PY

# Scale: a vault of $SCALE files against an empty one (Vaultaire only).
echo
echo "Scale (Vaultaire, $SCALE files):"
d="$W/scale"; mkdir -p "$d"
VAULTAIRE_ALLOW_WEAK_KDF=1 "$VAULTAIRE" init "$d/v" --passphrase-file "$W/pw" --kdf-iterations 1000 --recovery-iterations 1000 \
  --recovery-phrase-out "$d/phrase" --remember >/dev/null
mkdir -p "$d/mnt"
touch_cost() {  # mean ms of 200 creates
  local s e; s=$(now); for i in $(seq 200); do : > "$d/mnt/t-$1-$i"; done; e=$(now)
  python3 -c "print(f'{($e-$s)*1000/200:.3f}')"
}
single_touch() {  # median ms of 21 runs of touch(1), each creating one new file (the whole command: start, create, exit)
  local s e times=""
  for i in $(seq 21); do s=${EPOCHREALTIME/,/.}; touch "$d/mnt/one-$1-$i"; e=${EPOCHREALTIME/,/.}; times+=" $s:$e"; done
  python3 -c "import statistics, sys; print(f'{statistics.median(float(b) - float(a) for a, b in (t.split(\":\") for t in sys.argv[1:])) * 1000:.3f}')" $times
}
small_create() {  # files/s of tar x of the $SMALL-file tree into a new directory
  local s e; mkdir "$d/mnt/small-$1"; settle; s=$(now); tar -C "$d/mnt/small-$1" -xf "$W/small.tar"; e=$(now)
  python3 -c "print(f'{$SMALL/($e-$s):.0f}')"
}
VAULTAIRE_ALLOW_WEAK_KDF=1 "$VAULTAIRE" mount "$d/v" "$d/mnt" >/dev/null
settle  # the table's last rm -rf would otherwise slow the empty vault's creates (see settle)
empty=$(touch_cost empty)
empty_touch=$(single_touch empty)
empty_small=$(small_create empty)
make_tree "$SCALE" "$W/scale.tar"
s=$(now); tar -C "$d/mnt" -xf "$W/scale.tar"; e=$(now)
settle
full=$(touch_cost full)
full_touch=$(single_touch full)
full_small=$(small_create full)
"$VAULTAIRE" unmount "$d/mnt" >/dev/null
s=$(now); VAULTAIRE_ALLOW_WEAK_KDF=1 "$VAULTAIRE" mount "$d/v" "$d/mnt" >/dev/null; e=$(now)
mount_time=$(elapsed $s $e)
pid=$(pgrep -f -- "mount $d/v $d/mnt" | head -1)
ls -lR "$d/mnt" > /dev/null
rss=$(awk '/VmHWM/ {print $2/1024 " MB"}' /proc/$pid/status)
"$VAULTAIRE" unmount "$d/mnt" >/dev/null
# Unlock with and without the KDF, on a vault at the full 600,000 / 800,000 iterations.
"$VAULTAIRE" init "$d/strong" --passphrase-file "$W/pw" --recovery-phrase-out "$d/strong-phrase" >/dev/null
mkdir -p "$d/m2"
s=$(now); "$VAULTAIRE" mount "$d/strong" "$d/m2" --passphrase-file "$W/pw" --remember >/dev/null; e=$(now)
kdf_mount=$(elapsed $s $e); "$VAULTAIRE" unmount "$d/m2" >/dev/null
s=$(now); "$VAULTAIRE" mount "$d/strong" "$d/m2" >/dev/null; e=$(now)
nokdf_mount=$(elapsed $s $e); "$VAULTAIRE" unmount "$d/m2" >/dev/null
echo "| measure | value |"
echo "|---|---|"
echo "| create (: > file), empty vault | $empty ms |"
echo "| create, vault of $SCALE files | $full ms ($(python3 -c "print(f'{$full/$empty:.2f}')")× the empty vault) |"
echo "| a single touch(1) of a new file (the whole command), empty vault | $empty_touch ms |"
echo "| a single touch(1), vault of $SCALE files | $full_touch ms ($(python3 -c "print(f'{$full_touch/$empty_touch:.2f}')")× the empty vault) |"
echo "| tar x of $SMALL small files, empty vault | $empty_small files/s |"
echo "| tar x of $SMALL small files, vault of $SCALE files | $full_small files/s ($(python3 -c "print(f'{$full_small/$empty_small:.2f}')")× the empty vault's rate) |"
echo "| mount without KDF (remembered key), $SCALE files | $mount_time s |"
echo "| mount process peak RSS after ls -lR of $SCALE files | $rss |"
echo "| unlock + mount, credential through the KDF (600,000 iterations), empty vault | $kdf_mount s |"
echo "| unlock + mount, remembered key (no KDF), empty vault | $nokdf_mount s |"

# A million files, filled through the engine, against an empty vault and securefs (BENCH_MILLION=0
# leaves it out; it takes about half an hour).
if [ "${BENCH_MILLION:-1}" != 0 ]; then
  echo
  scripts/bench-scale.sh "${BENCH_MILLION_FILES:-1000000}" 3
  echo
  scripts/compaction-latency.sh "${BENCH_MILLION_FILES:-1000000}" 20000
fi

# Disk use of the same trees in each target (sizes, not speeds: one run). BENCH_DISK=0 leaves it out.
if [ "${BENCH_DISK:-1}" != 0 ]; then
  echo
  echo "Disk use:"
  scripts/bench-disk.sh 20000 "$SEQ_MB"
fi
