#!/usr/bin/env bash
# The main job, end to end on a fresh Debian 12 machine: install, build, then create a vault, mount it,
# use it with ordinary tools, unmount (which locks it), and show that only ciphertext remains.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
swift build -c release 2>&1 | tail -1
vaultaire="$(swift build -c release --show-bin-path)/vaultaire"

work="$(mktemp -d /tmp/vaultaire-demo.XXXXXX)"
mnt="$work/mnt"
cleanup() {
  if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The demo keeps its keychain in its own folder and uses a passphrase file; a person would use the
# Secret Service and type the passphrase at the prompt.
export XDG_DATA_HOME="$work/keychain-home"
export VAULTAIRE_KEYCHAIN=file
printf 'demo passphrase, not a good one\n' > "$work/passphrase"
chmod 600 "$work/passphrase"

step() { printf '\n== %s\n' "$*"; }

step "vaultaire init (full-strength KDF: 600,000 / 800,000 PBKDF2 iterations)"
"$vaultaire" init "$work/vault" --passphrase-file "$work/passphrase" --recovery-phrase-out "$work/recovery-phrase"

if "$vaultaire" help mount >/dev/null 2>&1; then
  step "vaultaire mount"
  mkdir "$mnt"
  "$vaultaire" mount "$work/vault" "$mnt" --passphrase-file "$work/passphrase"
  "$vaultaire" status

  step "ordinary tools inside the mount"
  mkdir -p "$mnt/letters" "$mnt/project"
  echo "Dear diary, the tax return is in the other folder." > "$mnt/letters/diary.txt"
  cp /etc/os-release "$mnt/letters/"
  head -c 5M /dev/urandom > "$work/random.bin"
  cp "$work/random.bin" "$mnt/random.bin"
  cmp "$work/random.bin" "$mnt/random.bin" && echo "cp + cmp: 5 MiB identical"
  sqlite3 "$mnt/project/notes.db" "create table notes(body text); insert into notes values ('secret meeting at noon');"
  echo "sqlite3: $(sqlite3 "$mnt/project/notes.db" 'select body from notes')"
  git -C "$mnt/project" init -q && git -C "$mnt/project" add notes.db \
    && git -C "$mnt/project" -c user.name=demo -c user.email=demo@example.org commit -qm "notes" \
    && echo "git: $(git -C "$mnt/project" log --oneline)"
  rsync -a "$mnt/letters/" "$mnt/letters-copy/" && echo "rsync -a: copied"
  ls -lR "$mnt" | head -30

  step "vaultaire unmount (locks: keys and caches wiped)"
  "$vaultaire" unmount "$mnt"
else
  step "putting files in (the mount is not built yet)"
  echo "Dear diary, the tax return is in the other folder." > "$work/diary.txt"
  "$vaultaire" mkdir "$work/vault" /letters --passphrase-file "$work/passphrase"
  "$vaultaire" put "$work/vault" "$work/diary.txt" /letters/diary.txt --passphrase-file "$work/passphrase"
  "$vaultaire" ls "$work/vault" /letters --passphrase-file "$work/passphrase"
fi

step "vaultaire verify"
"$vaultaire" verify "$work/vault" --passphrase-file "$work/passphrase"

step "what is on disk: random names, ciphertext only"
find "$work/vault" -type f -not -name '*.lock' | sed "s|$work/||" | head -12
if grep -r -l -e "diary" -e "secret meeting" -e "tax return" "$work/vault"; then
  echo "FAIL: plaintext found in the vault directory"; exit 1
fi
echo "grep for file names and contents in the vault directory: nothing found"
"$vaultaire" info "$work/vault"

step "vaultaire backup to a local rclone remote (ciphertext only), twice: the second sends only a manifest"
export RCLONE_CONFIG="$work/rclone.conf"
"$vaultaire" backup "$work/vault" "$work/remote" --passphrase-file "$work/passphrase"
"$vaultaire" backup "$work/vault" "$work/remote" --passphrase-file "$work/passphrase"
"$vaultaire" backup --list "$work/remote" --passphrase-file "$work/passphrase"

step "a new machine (an empty keychain): vaultaire restore with the passphrase alone"
XDG_DATA_HOME="$work/new-machine" "$vaultaire" restore "$work/remote" "$work/restored" --passphrase-file "$work/passphrase"
XDG_DATA_HOME="$work/new-machine" "$vaultaire" ls "$work/restored" / --passphrase-file "$work/passphrase"
