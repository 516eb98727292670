# Shared by the benchmark scripts (sourced, not run): the workspace, the timing helpers, the tree of small
# files, and how each target is mounted and unmounted. mount_target also needs PASSTHROUGH (the
# compiled libfuse example) for the passthrough target.

# Builds Vaultaire in release mode (VAULTAIRE) and makes the work directory W — under BENCH_DIR,
# the host filesystem every target's backing directory lives on (default /tmp) — with the
# passphrase every target uses; on exit any mount left in it is unmounted and W removed.
# $1 names the caller, in messages and in W.
prepare_workspace() {
  swift build -c release >/dev/null 2>&1 || { echo "$1: release build failed"; exit 0; }
  VAULTAIRE="$(swift build -c release --show-bin-path)/vaultaire"
  W="$(mktemp -d "${BENCH_DIR:-/tmp}/vaultaire-$1.XXXXXX")"
  trap remove_workspace EXIT
  export XDG_DATA_HOME="$W/xdg" VAULTAIRE_KEYCHAIN=file
  printf 'bench passphrase\n' > "$W/pw"
}

# FUSE over io_uring is switched by the fuse module's enable_uring (Linux 6.14+). URING_FOUND is its
# value as found, empty where the kernel lacks it or it cannot be changed here; the vaultaire-uring
# target turns it on for its own mount and puts the found value back when it unmounts.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_FOUND=""
[ -w "$URING_PARAM" ] && URING_FOUND=$(cat "$URING_PARAM")

now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.3f}')"; }  # seconds from time $1 to time $2

remove_workspace() {
  for m in "$W"/*/mnt; do mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"; }; done
  [ -n "$URING_FOUND" ] && echo "$URING_FOUND" > "$URING_PARAM"
  rm -rf "$W"
}

# A tree of small files (1–4 KiB, 100 per directory) for tar x.
make_tree() {  # $1 = count, $2 = tarball
  python3 - "$1" "$2" <<'PY'
import io, os, random, sys, tarfile
n, out = int(sys.argv[1]), sys.argv[2]
random.seed(7)
with tarfile.open(out, "w") as t:
    for i in range(n):
        data = os.urandom(random.randint(1024, 4096))
        info = tarfile.TarInfo(f"tree/d{i // 100:04d}/f{i:06d}.txt"); info.size = len(data)
        t.addfile(info, io.BytesIO(data))
PY
}

mount_target() {  # $1 = target, $2 = dir; sets MNT
  local t="$1" d="$2"; MNT="$d/mnt"; mkdir -p "$d/back" "$MNT"
  case "$t" in
    plain) MNT="$d/back" ;;
    passthrough) "$PASSTHROUGH" -o "modules=subdir,subdir=$d/back" "$MNT" ;;
    vaultaire|vaultaire-nx|vaultaire-uring)
      [ "$t" = vaultaire-uring ] && echo Y > "$URING_PARAM"
      VAULTAIRE_ALLOW_WEAK_KDF=1 "$VAULTAIRE" init "$d/back/v" --passphrase-file "$W/pw" --kdf-iterations 1000 \
        --recovery-iterations 1000 --recovery-phrase-out "$d/phrase" >/dev/null
      VAULTAIRE_ALLOW_WEAK_KDF=1 "$VAULTAIRE" mount "$d/back/v" "$MNT" --passphrase-file "$W/pw" \
        $([ "$t" = vaultaire-nx ] && echo --no-xattrs) >/dev/null ;;
    gocryptfs)
      gocryptfs -init -q -scryptn 10 -passfile "$W/pw" "$d/back" >/dev/null 2>&1
      gocryptfs -q -passfile "$W/pw" "$d/back" "$MNT" 2>/dev/null ;;
    securefs)
      securefs create --pass "bench passphrase" "$d/back" >/dev/null 2>&1
      securefs mount -b --pass "bench passphrase" "$d/back" "$MNT" >/dev/null 2>&1
      for _ in $(seq 50); do mountpoint -q "$MNT" && break; sleep 0.1; done ;;
    cryfs)
      CRYFS_FRONTEND=noninteractive CRYFS_NO_UPDATE_CHECK=true cryfs --cipher aes-256-gcm "$d/back" "$MNT" \
        < <(printf 'bench passphrase\nbench passphrase\n') >/dev/null 2>&1 ;;
  esac
}

unmount_target() {
  [ "$1" = plain ] && return
  case "$1" in
    vaultaire*) "$VAULTAIRE" unmount "$MNT" >/dev/null ;;
    *) fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" ;;
  esac
  [ "$1" = vaultaire-uring ] && echo "$URING_FOUND" > "$URING_PARAM"
  return 0
}
