#!/usr/bin/env bash
# Builds the Debian package dist/vaultaire_<version>_<arch>.deb (into $OUT when set) and prints its path.
#
# The binary is built in release mode with the Swift runtime and Foundation linked in statically,
# so the package needs only Debian's libraries (dpkg-shlibdeps finds them), not a Swift toolchain.
# The man page and the completion scripts come from the binary itself ('vaultaire __generate'),
# made from the same command specs as 'vaultaire help'. Needs dpkg-dev and binutils
# (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# A build directory of its own: the test that runs this script runs inside 'swift test', which holds
# .build's lock until it ends.
build=(swift build -c release --static-swift-stdlib --scratch-path .build/package)
"${build[@]}" --product vaultaire >&2
bin="$("${build[@]}" --show-bin-path)/vaultaire"
version="$("$bin" --version | sed -n '1s/^vaultaire //p')"
arch="$(dpkg --print-architecture)"
[ -n "$version" ] || { echo "package-deb: could not read the version from $bin --version" >&2; exit 1; }

work="$(mktemp -d /tmp/vaultaire-deb.XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
doc="$root/usr/share/doc/vaultaire"

install -D -m 0755 "$bin" "$root/usr/bin/vaultaire"
strip --strip-unneeded "$root/usr/bin/vaultaire"
# mount(8) looks for /sbin/mount.fuse.<subtype> before mount.fuse: this names the helper outright.
# mount.fuse3 then runs 'vaultaire VAULT MNT -o …' from the default PATH, which has /usr/bin.
mkdir -p "$root/usr/sbin"
ln -s mount.fuse3 "$root/usr/sbin/mount.fuse.vaultaire"

mkdir -p "$root/usr/share/man/man1" "$root/usr/share/man/man5" "$root/usr/share/man/man8"
"$bin" __generate man | gzip -9n > "$root/usr/share/man/man1/vaultaire.1.gz"
gzip -9n < docs/man/vaultaire-format.5 > "$root/usr/share/man/man5/vaultaire-format.5.gz"
# The helper link is mount.fuse3 under another name: its page is mount.fuse3's.
echo ".so man8/mount.fuse3.8" | gzip -9n > "$root/usr/share/man/man8/mount.fuse.vaultaire.8.gz"

install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
"$bin" __generate bash > "$root/usr/share/bash-completion/completions/vaultaire"
"$bin" __generate zsh > "$root/usr/share/zsh/vendor-completions/_vaultaire"
"$bin" __generate fish > "$root/usr/share/fish/vendor_completions.d/vaultaire.fish"

install -D -m 0644 packaging/systemd/vaultaire@.service "$root/usr/lib/systemd/user/vaultaire@.service"

install -d "$doc"
for f in README.md docs/FORMAT.md docs/SECURITY.md docs/PERFORMANCE.md; do
  gzip -9n < "$f" > "$doc/$(basename "$f").gz"
done
install -m 0644 packaging/debian/copyright "$doc/copyright"
{
  echo "vaultaire ($version) unstable; urgency=medium"
  echo
  echo "  * Built from $(git describe --always --dirty 2>/dev/null || echo 'a source tree without git')."
  echo
  echo " -- Vaultaire developers <maintainers@vaultaire.invalid>  $(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$doc/changelog.gz"  # a native package (no Debian revision): changelog, not changelog.Debian

# The shared libraries' packages, as dpkg-shlibdeps reads them from the binary.
mkdir -p "$work/debian"
printf 'Source: vaultaire\n\nPackage: vaultaire\nArchitecture: any\n' > "$work/debian/control"
shlibs="$(cd "$work" && dpkg-shlibdeps -O -e root/usr/bin/vaultaire 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[ -n "$shlibs" ] || { echo "package-deb: dpkg-shlibdeps found no libraries" >&2; exit 1; }
# Thumbnails need libvips (libvips42 on Debian 12). The binary loads it at its first thumbnail (dlopen),
# so it is not among the NEEDED libraries dpkg-shlibdeps reads: the package holding it is added here.
# (awk reads ldconfig's whole output: stopping early would fail the pipeline under pipefail.)
vips_library="$(ldconfig -p | awk '/libvips\.so\.[0-9]+ / && !found {print $NF; found = 1}')"
vips_package="$( (dpkg -S "$(readlink -f "$vips_library")" 2>/dev/null || true) | cut -d: -f1 | sed -n 1p)"
[ -n "$vips_package" ] || { echo "package-deb: no installed package holds libvips" >&2; exit 1; }
case "$shlibs" in *"$vips_package"*) ;; *) shlibs="$shlibs, $vips_package" ;; esac

mkdir -p "$root/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@SHLIBS@/$shlibs/" \
  packaging/debian/control.in > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 0755 {} +
find "$root/usr/share" -type f -exec chmod 0644 {} +

deb="$out/vaultaire_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
