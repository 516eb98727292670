#!/usr/bin/env bash
# The scale part of the benchmarks: a vault of FILES files (FILES/100 directories of 100 files of
# 0–16 KiB) against an empty vault, and `find` of the whole tree against securefs holding the same
# names and sizes. The full vault is filled through the engine (vaultaire-populate): through a mount,
# a million files take most of an hour. Medians of ROUNDS; reports, never fails.
# Usage: scripts/bench-scale.sh [files=1000000] [rounds=3]
set -uo pipefail
cd "$(dirname "$0")/.."
FILES="${1:-1000000}"; ROUNDS="${2:-3}"
source scripts/bench-targets.sh
prepare_workspace scale
POPULATE="$(dirname "$VAULTAIRE")/vaultaire-populate"
export VAULTAIRE_ALLOW_WEAK_KDF=1
DIRS=$((FILES / 100))
median() { python3 -c "import statistics, sys; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "$@"; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
make_tree 5000 "$W/small.tar"

new_vault() {  # $1 = dir
  mkdir -p "$1/mnt"
  "$VAULTAIRE" init "$1/v" --passphrase-file "$W/pw" --kdf-iterations 1000 --recovery-iterations 1000 \
    --recovery-phrase-out "$1/phrase" --remember >/dev/null 2>&1
}
mount_vault() { "$VAULTAIRE" mount "$1/v" "$1/mnt" >/dev/null 2>&1; }
daemon_pid() { pgrep -f -- "mount $1/v $1/mnt" | head -1; }
rss() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
hwm() { awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# Each measure in ms (or files/s for tar), on the vault mounted at $1/mnt: a create (mean of 200), a
# stat of a file not looked up before (mean of 200, in the populated directories), an ls -l of a
# 100-entry directory (mean of 20, kernel caches dropped first), and tar x of 5,000 small files.
measure_vault() {  # $1 = dir, $2 = label, $3 = files, $4 = directories (as populated)
  local m="$1/mnt" s e k
  mkdir -p "$m/probe-$2"
  s=$(now); for i in $(seq 200); do : > "$m/probe-$2/c$i"; done; e=$(now)
  CREATE+=("$(python3 -c "print(($e-$s)*1000/200)")")
  drop_caches
  s=$(now)
  for i in $(seq 200); do k=$((i * 97 % $3)); stat "$m/$(printf 'd%05d/f%07d' $((k % $4)) "$k")" >/dev/null; done
  e=$(now)
  STAT+=("$(python3 -c "print(($e-$s)*1000/200)")")
  drop_caches
  s=$(now); for i in $(seq 20); do ls -l "$m/$(printf 'd%05d' $((i * 31 % $4)))" >/dev/null; done; e=$(now)
  LS+=("$(python3 -c "print(($e-$s)*1000/20)")")
  mkdir "$m/tar-$2"; sync; sleep 3
  s=$(now); tar -C "$m/tar-$2" -xf "$W/small.tar"; e=$(now)
  TAR+=("$(python3 -c "print(5000/($e-$s))")")
}

echo "Scale: a vault of $FILES files in $DIRS directories (filled through the engine), $ROUNDS rounds"
new_vault "$W/empty"
new_vault "$W/full"
# The empty vault gets the same 100-file directories' names, empty, so that its stat and ls hit files.
"$POPULATE" "$W/empty/v" 100 1 0 >/dev/null 2>&1
"$POPULATE" "$W/full/v" "$FILES" "$DIRS" >/dev/null 2>&1
declare -A V
for r in $(seq "$ROUNDS"); do
  for which in empty full; do
    CREATE=(); STAT=(); LS=(); TAR=()
    drop_caches
    s=$(now); mount_vault "$W/$which"; e=$(now)
    pid=$(daemon_pid "$W/$which")
    V[$which,mount,$r]=$(elapsed "$s" "$e"); V[$which,rss_mounted,$r]=$(rss "$pid")
    if [ "$which" = empty ]; then measure_vault "$W/$which" "$which-$r" 100 1; else
      measure_vault "$W/$which" "$which-$r" "$FILES" "$DIRS"; fi
    V[$which,create,$r]=${CREATE[0]}; V[$which,stat,$r]=${STAT[0]}; V[$which,ls,$r]=${LS[0]}; V[$which,tar,$r]=${TAR[0]}
    drop_caches
    s=$(now); find "$W/$which/mnt" -printf '%s\n' | wc -l >/dev/null; e=$(now)
    V[$which,find,$r]=$(elapsed "$s" "$e"); V[$which,rss_find,$r]=$(rss "$pid"); V[$which,hwm,$r]=$(hwm "$pid")
    "$VAULTAIRE" unmount "$W/$which/mnt" >/dev/null 2>&1
  done
done

# securefs with the same names and sizes (zero-filled: find reads no contents).
mount_target securefs "$W/securefs"
python3 - "$W/full/v" "$MNT" "$FILES" "$DIRS" <<'PY'
import os, sys
vault, mnt, files, dirs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# The sizes vaultaire-populate drew (its size stream, seeded the same way).
state, mask = 0x9E3779B97F4A7C15, (1 << 64) - 1
def nxt():
    global state
    state ^= state >> 12; state = (state ^ (state << 25)) & mask; state ^= state >> 27
    return (state * 0x2545F4914F6CDD1D) & mask
for d in range(dirs): os.mkdir(f"{mnt}/d{d:05d}")
for f in range(files):
    size = nxt() % 16385
    fd = os.open(f"{mnt}/d{f % dirs:05d}/f{f:07d}", os.O_CREAT | os.O_WRONLY, 0o644)
    if size: os.ftruncate(fd, size)
    os.close(fd)
PY
SECUREFS_MNT="$MNT"
for r in $(seq "$ROUNDS"); do
  drop_caches
  s=$(now); find "$SECUREFS_MNT" -printf '%s\n' | wc -l >/dev/null; e=$(now)
  V[securefs,find,$r]=$(elapsed "$s" "$e")
done
unmount_target securefs "$W/securefs"

m() { local xs=(); for r in $(seq "$ROUNDS"); do xs+=("${V[$1,$2,$r]}"); done; median "${xs[@]}"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
echo
echo "| measure | empty vault | vault of $FILES files | ratio |"
echo "|---|---|---|---|"
for k in "mount (remembered key) s:mount" "create ms:create" "stat of a file ms:stat" "ls -l of a 100-entry directory ms:ls"; do
  label=${k%%:*}; key=${k##*:}
  echo "| $label | $(m empty "$key") | $(m full "$key") | $(ratio "$(m full "$key")" "$(m empty "$key")")× |"
done
echo "| tar x of 5,000 files, files/s | $(m empty tar) | $(m full tar) | $(ratio "$(m empty tar)" "$(m full tar)")× the time |"
echo "| daemon RSS after mount MB | $(m empty rss_mounted) | $(m full rss_mounted) | |"
echo "| daemon RSS after find MB (peak) | $(m empty rss_find) ($(m empty hwm)) | $(m full rss_find) ($(m full hwm)) | |"
echo
echo "| find of the whole tree, cold | vaultaire s | securefs s | vaultaire ÷ securefs (time) |"
echo "|---|---|---|---|"
echo "| $FILES files | $(m full find) | $(m securefs find) | $(ratio "$(m full find)" "$(m securefs find)")× |"
