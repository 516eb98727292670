#!/usr/bin/env bash
# Backups against rclone itself: `vaultaire backup` of a vault of N files (default 10,000 of 1–200 KiB,
# about 1 GiB) to a local remote and to an SFTP remote (Debian's sshd, started here on a free port with
# throwaway keys), beside `rclone copy` of the same vault directory to the same remote, interleaved in
# each round; then a second backup with nothing changed, a backup after one file changed (the bytes it
# wrote to the remote, counted on the local remote), and a restore on a fresh keychain with the
# passphrase alone beside `rclone copy` back. Medians of the rounds; it reports and never fails.
# Usage: scripts/bench-backup.sh [rounds=3] [files=10000] [max KiB per file=200]
# BENCH_BACKUP_REMOTES="local" (or "sftp") measures one kind of remote only: an SFTP round of the
# default vault takes about 45 minutes here, a local one under a minute.
set -uo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${1:-3}"; FILES="${2:-10000}"; MAX_KIB="${3:-200}"; KINDS="${BENCH_BACKUP_REMOTES:-local sftp}"
scripts/install-deps.sh >/dev/null
source scripts/bench-targets.sh
prepare_workspace bench-backup
SSHD_PID=""
stop_sshd() { [ -n "$SSHD_PID" ] && kill "$SSHD_PID" 2>/dev/null; remove_workspace; }
trap stop_sshd EXIT

# The vault: N random files in 100 per directory, extracted through a mount, then locked.
python3 - "$FILES" "$MAX_KIB" "$W/tree.tar" <<'PY'
import io, os, random, sys, tarfile
n, top, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
random.seed(24)
with tarfile.open(out, "w") as t:
    for i in range(n):
        data = os.urandom(random.randint(1024, top * 1024))
        info = tarfile.TarInfo(f"tree/d{i // 100:04d}/f{i:06d}"); info.size = len(data)
        t.addfile(info, io.BytesIO(data))
PY
# At the full KDF costs, so that each backup and restore pays the passphrase's 600,000 iterations as a user's would.
VAULT="$W/src/v"; mkdir -p "$W/src/mnt"
"$VAULTAIRE" init "$VAULT" --passphrase-file "$W/pw" --recovery-phrase-out "$W/src/phrase" >/dev/null
"$VAULTAIRE" mount "$VAULT" "$W/src/mnt" --passphrase-file "$W/pw" >/dev/null
tar -C "$W/src/mnt" -xf "$W/tree.tar"
"$VAULTAIRE" unmount "$W/src/mnt" >/dev/null
rm -f "$W/tree.tar"
vault_bytes=$(du -s --block-size=1 "$VAULT" | cut -f1)

# sshd on a free port, serving SFTP to root with a throwaway user key.
S="$W/sshd"; mkdir -p "$S" /run/sshd
ssh-keygen -q -t ed25519 -N "" -f "$S/host"; ssh-keygen -q -t ed25519 -N "" -f "$S/user"
cp "$S/user.pub" "$S/authorized_keys"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$S/config" <<EOF
Port $PORT
ListenAddress 127.0.0.1
HostKey $S/host
PidFile $S/pid
AuthorizedKeysFile $S/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
LogLevel ERROR
EOF
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$S/host.pub")" > "$S/known_hosts"
/usr/sbin/sshd -D -e -f "$S/config" 2>"$S/log" & SSHD_PID=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
SFTP=":sftp,host=127.0.0.1,port=$PORT,user=$(id -un),key_file=$S/user,known_hosts_file=$S/known_hosts"

remote() {  # $1 kind, $2 path on it
  case "$1" in local) echo "$W/remote/$2" ;; sftp) echo "$SFTP:$W/sftp/$2" ;; esac
}
timed() {  # runs "$@", prints its seconds
  local s e; s=$(now); "$@" >/dev/null 2>"$W/err" || { echo "  failed: $* — $(tail -1 "$W/err")" >&2; }
  e=$(now); elapsed "$s" "$e"
}
BACKUP=("$VAULTAIRE" backup --quiet --keep 10 --passphrase-file "$W/pw")

export XDG_CACHE_HOME="$W/cache"  # the backups' hash cache (docs/FORMAT.md, "The hash cache")
declare -A R  # R[measure,kind,round]
for r in $(seq 1 "$ROUNDS"); do
  for kind in $KINDS; do
    echo "  round $r: $kind" >&2
    rm -rf "$W/remote" "$W/sftp" "$W/back-copy" "$W/restored"; mkdir -p "$W/remote" "$W/sftp"
    sync
    R[rclone,$kind,$r]=$(timed rclone copy "$VAULT" "$(remote $kind copy)")
    # A first backup reads every file: no hashes kept from an earlier round.
    rm -rf "$XDG_CACHE_HOME"
    R[first,$kind,$r]=$(timed "${BACKUP[@]}" "$VAULT" "$(remote $kind bk)")
    R[again,$kind,$r]=$(timed "${BACKUP[@]}" "$VAULT" "$(remote $kind bk)")
    # One file changed through the mount; what the next backup writes, counted on the local remote.
    "$VAULTAIRE" mount "$VAULT" "$W/src/mnt" --passphrase-file "$W/pw" >/dev/null
    changed=$((FILES / 2)); head -c 100000 /dev/urandom > "$W/src/mnt/$(printf 'tree/d%04d/f%06d' $((changed / 100)) $changed)"
    "$VAULTAIRE" unmount "$W/src/mnt" >/dev/null
    touch "$W/marker"; sleep 1
    R[changed,$kind,$r]=$(timed "${BACKUP[@]}" "$VAULT" "$(remote $kind bk)")
    if [ "$kind" = local ]; then
      # By ctime: rclone gives each object its source's modification time.
      R[changedbytes,$kind,$r]=$(find "$W/remote/bk" -type f -cnewer "$W/marker" -printf '%s\n' | awk '{s+=$1} END {print s+0}')
      R[changedobjects,$kind,$r]=$(find "$W/remote/bk" -type f -cnewer "$W/marker" | wc -l)
    fi
    R[rcloneback,$kind,$r]=$(timed rclone copy "$(remote $kind copy)" "$W/back-copy")
    # A new machine: an empty keychain, the passphrase alone.
    R[restore,$kind,$r]=$(XDG_DATA_HOME="$W/xdg-new-$kind-$r" timed "$VAULTAIRE" restore --quiet "$(remote $kind bk)" \
      "$W/restored" --passphrase-file "$W/pw")
  done
done

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:] if x]; print(f'{statistics.median(v):.6g}' if v else '')" "$@"; }
med() { local vals=(); for r in $(seq 1 "$ROUNDS"); do vals+=("${R[$1,$2,$r]:-}"); done; median "${vals[@]}"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}×' if '$1' and '$2' and float('$2') > 0 else '–')" 2>/dev/null || echo –; }

echo "Backup — $(date -u +%Y-%m-%d), vaultaire $(git rev-parse --short HEAD 2>/dev/null), $(rclone version 2>/dev/null | head -1), rounds=$ROUNDS"
echo "vault: $FILES files of 1–$MAX_KIB KiB, $((vault_bytes / 1000000)) MB on disk"
echo
echo "| measure | local remote | SFTP remote |"
echo "|---|---|---|"
for kind in local sftp; do
  for m in rclone first again changed rcloneback restore; do eval "M_${m}_$kind=\$(med $m $kind)"; done
done
echo "| rclone copy of the vault directory, s | $M_rclone_local | $M_rclone_sftp |"
echo "| first vaultaire backup, s | $M_first_local | $M_first_sftp |"
echo "| first backup ÷ rclone copy | $(ratio "$M_first_local" "$M_rclone_local") | $(ratio "$M_first_sftp" "$M_rclone_sftp") |"
echo "| second backup, nothing changed, s | $M_again_local | $M_again_sftp |"
echo "| backup after one file changed, s | $M_changed_local | $M_changed_sftp |"
echo "| rclone copy back, s | $M_rcloneback_local | $M_rcloneback_sftp |"
echo "| restore (new keychain, passphrase alone, every object verified), s | $M_restore_local | $M_restore_sftp |"
echo "| restore ÷ rclone copy back | $(ratio "$M_restore_local" "$M_rcloneback_local") | $(ratio "$M_restore_sftp" "$M_rcloneback_sftp") |"
echo
echo "After one 100,000-byte file changed, the backup wrote $(med changedobjects local) files of $(med changedbytes local) bytes in all to the local remote (objects and the manifest)."
