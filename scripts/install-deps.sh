#!/usr/bin/env bash
# Installs every Debian package Vaultaire needs to build, test and run. Idempotent, non-interactive.
set -euo pipefail

packages=(
  pkg-config libssl-dev                 # libcrypto: AES-256-GCM, PBKDF2, RAND_bytes
  libfuse3-dev fuse3                    # the mount, and fusermount3
  liburing-dev                          # FUSE over io_uring, where the kernel offers it
  libsecret-1-dev gnome-keyring dbus libglib2.0-bin   # Secret Service keychain, and a real one for tests
  libvips-dev libvips-tools             # thumbnails (libvips), and the vips command the thumbnail tests make images with
  python3-mnemonic                      # the BIP-39 English word list for recovery phrases
  sqlite3 git rsync tar findutils coreutils psmisc    # ordinary tools the demo and the mount tests use
  mount util-linux bsdutils fuse3       # mount(8), unshare, nsenter, findmnt, script(1): helper, log, progress tests
  systemd                               # systemd-analyze verify for the unit template (nothing is started)
  man-db groff-base mandoc              # man -l, groff -ww and mandoc -T lint check the man pages
  bash zsh fish                         # syntax checks of the completion scripts
  dpkg-dev binutils lintian             # scripts/package-deb.sh (dpkg-shlibdeps, dpkg-deb, strip); lintian checks the .deb
  rclone                                # backups: the only way Vaultaire talks to a remote
  openssh-server openssh-client         # backup tests: a throwaway sshd as an SFTP remote
)

# Backup tests: moto's standalone S3 server, from PyPI (Debian 12 has no package of it).
install_moto() {
  python3 -c 'import moto.server, flask_cors' 2>/dev/null && return 0
  echo "install-deps: installing moto[server] from PyPI"
  python3 -m pip install --quiet 'moto[server]' 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages 'moto[server]'
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_moto
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_moto
echo "install-deps: done"
