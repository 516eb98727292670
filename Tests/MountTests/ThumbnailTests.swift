import Foundation
import TestSupport
import XCTest

/// Thumbnails through a real mount (issue 25): images made by the `vips` command (libvips-tools),
/// copied in with `cp`, thumbnails made in the background, read back from `.sh_thumbnails` and
/// compared with the source; the vault directory checked for plaintext. Each test runs in a private
/// mount namespace whose EXIT trap unmounts, whatever failed.
final class ThumbnailTests: MountTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/vips") else {
            throw XCTSkip("the vips command (Debian's libvips-tools) is not installed")
        }
    }

    override func tearDown() {
        mv?.endStrayDaemons()
        super.tearDown()
    }

    /// Shell helpers: image making and comparing, waiting with a bound, reading the Thumb:: chunks.
    static let helpers = #"""
        export TMPDIR="$ROOT/daemon-tmp"; mkdir -p "$TMPDIR"
        md5name() { printf '%s' "$1" | md5sum | cut -c1-32; }
        large() { echo "$MNT/.sh_thumbnails/large/$(md5name "$1").png"; }
        normal() { echo "$MNT/.sh_thumbnails/normal/$(md5name "$1").png"; }
        # 30 s at most: the thumbnailer runs at idle priority beside other tests on a loaded machine.
        wait_for() { for _ in $(seq 300); do [ -e "$1" ] && return 0; sleep 0.1; done; fail "no $1 after 30 s"; }
        wait_gone() { for _ in $(seq 300); do [ -e "$1" ] || return 0; sleep 0.1; done; fail "$1 still there after 30 s"; }
        # An image with structure (not noise), so a thumbnail of another image differs from it.
        make_image() { # kind width height out
          vips "$1" "$ROOT/f.v" "$2" "$3" && vips linear "$ROOT/f.v" "$ROOT/u.v" 127 128 --uchar && vips copy "$ROOT/u.v" "$4"
          rm -f "$ROOT/f.v" "$ROOT/u.v"
        }
        # Mean absolute difference of a thumbnail and libvips' own 256 px thumbnail of a source.
        mae() {
          vips thumbnail "$2" "$ROOT/ref.v" 256 && vips subtract "$1" "$ROOT/ref.v" "$ROOT/d.v" \
            && vips abs "$ROOT/d.v" "$ROOT/a.v" && vips avg "$ROOT/a.v"
          rm -f "$ROOT/ref.v" "$ROOT/d.v" "$ROOT/a.v"
        }
        below() { awk -v x="$1" -v b="$2" 'BEGIN { exit !(x < b) }'; }
        dims() { echo "$(vipsheader -f width "$1")x$(vipsheader -f height "$1")"; }
        # The tEXt chunks of a PNG (each chunk's CRC checked) as key=value lines.
        texts() {
          python3 -c '
        import struct, sys, zlib
        d = open(sys.argv[1], "rb").read()
        assert d[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature"
        i = 8
        while i < len(d):
            n, = struct.unpack(">I", d[i:i + 4]); kind = d[i + 4:i + 8]; data = d[i + 8:i + 8 + n]
            assert zlib.crc32(kind + data) == struct.unpack(">I", d[i + 8 + n:i + 12 + n])[0], kind
            if kind == b"tEXt":
                k, v = data.split(b"\0", 1); print(k.decode() + "=" + v.decode())
            i += 12 + n
        ' "$1"
        }
        no_plaintext() {
          if grep -rlaF 'Thumb::URI' "$VAULT"; then fail "Thumb::URI in the vault directory"; fi
          if grep -rlaP '\x89PNG\r\n\x1a\n' "$VAULT"; then fail "a PNG signature in the vault directory"; fi
          [ -z "$(ls -A "$TMPDIR")" ] || fail "the daemon left files in TMPDIR: $(ls -A "$TMPDIR")"
        }
        thumbs_on_disk() { find "$VAULT/thumbs" -type f | wc -l; }
        mount_vault() { "$VAULTAIRE" mount "$VAULT" "$MNT" --passphrase-file "$PW" "$@" > /dev/null || fail "mount $*"; }
        unmount_vault() { fusermount3 -u "$MNT" || fail "unmount"; wait_locked; }

        """#

    func testThumbnailsAppearResembleTheSourceAndFollowTheFile() throws {
        try mv.inPrivateNamespace(
            ThumbnailTests.helpers + """
                make_image sines 1200 800 "$ROOT/a.jpg"
                make_image zone 1200 800 "$ROOT/b.png"
                head -c 300000 /dev/urandom > "$ROOT/noise.bin"
                mount_vault
                [ ! -e "$MNT/.sh_thumbnails" ] || fail ".sh_thumbnails shown in a directory without images"
                cp "$ROOT/a.jpg" "$MNT/photo.jpg"
                cp "$ROOT/noise.bin" "$MNT/data.jpg"   # named like an image, holds none
                wait_for "$(large photo.jpg)"
                wait_for "$(normal photo.jpg)"
                [ "$(dims "$(large photo.jpg)")" = 256x171 ] || fail "large: $(dims "$(large photo.jpg)")"
                [ "$(dims "$(normal photo.jpg)")" = 128x86 ] || fail "normal: $(dims "$(normal photo.jpg)")"
                same=$(mae "$(large photo.jpg)" "$ROOT/a.jpg"); other=$(mae "$(large photo.jpg)" "$ROOT/b.png")
                below "$same" 4 || fail "thumbnail differs from its source by $same"
                below 20 "$other" || fail "thumbnail resembles another image ($other)"
                texts "$(large photo.jpg)" > "$ROOT/texts"
                grep -qx 'Thumb::URI=photo.jpg' "$ROOT/texts" || fail "URI: $(cat "$ROOT/texts")"
                grep -qx "Thumb::MTime=$(stat -c %Y "$MNT/photo.jpg")" "$ROOT/texts" || fail "MTime: $(cat "$ROOT/texts")"
                grep -qx "Thumb::Size=$(stat -c %s "$MNT/photo.jpg")" "$ROOT/texts" || fail "Size: $(cat "$ROOT/texts")"
                sleep 1; [ ! -e "$(large data.jpg)" ] || fail "a thumbnail of a file that is no image"
                ls -A "$MNT" | grep -qx .sh_thumbnails || fail ".sh_thumbnails not listed"
                # Read-only.
                if touch "$MNT/.sh_thumbnails/large/x" 2> "$ROOT/err"; then fail "created a file in .sh_thumbnails"; fi
                grep -q 'Read-only file system' "$ROOT/err" || fail "not EROFS: $(cat "$ROOT/err")"
                if rm "$(large photo.jpg)" 2> "$ROOT/err"; then fail "removed a thumbnail"; fi
                grep -q 'Read-only file system' "$ROOT/err" || fail "not EROFS: $(cat "$ROOT/err")"
                # Rename keeps it (under the new name's hash).
                mv "$MNT/photo.jpg" "$MNT/renamed.jpg"
                [ -e "$(large renamed.jpg)" ] || fail "no thumbnail after rename"
                [ ! -e "$(large photo.jpg)" ] || fail "the old name's thumbnail stayed"
                # Overwrite with another image: refreshed.
                cp "$ROOT/b.png" "$MNT/renamed.jpg"
                for _ in $(seq 300); do
                  below "$(mae "$(large renamed.jpg)" "$ROOT/b.png" 2>/dev/null || echo 999)" 4 && break; sleep 0.1
                done
                below "$(mae "$(large renamed.jpg)" "$ROOT/b.png")" 4 || fail "thumbnail not refreshed after overwrite"
                # A hard link shows the same thumbnail under its own name.
                ln "$MNT/renamed.jpg" "$MNT/linked.jpg"
                [ -e "$(large linked.jpg)" ] || fail "no thumbnail for the hard link"
                texts "$(large linked.jpg)" | grep -qx 'Thumb::URI=linked.jpg' || fail "link's URI"
                [ "$(thumbs_on_disk)" = 1 ] || fail "$(thumbs_on_disk) thumbnail files for one image"
                # Truncate to 0: gone (both names).
                truncate -s 0 "$MNT/linked.jpg"
                wait_gone "$(large renamed.jpg)"
                [ ! -e "$(large linked.jpg)" ] || fail "thumbnail stayed after truncate"
                [ "$(thumbs_on_disk)" = 0 ] || fail "a thumbnail file stayed after truncate"
                # Unlink: the reaper removes the thumbnail with the blob.
                cp "$ROOT/a.jpg" "$MNT/gone.jpg"
                wait_for "$(large gone.jpg)"
                rm "$MNT/gone.jpg" "$MNT/renamed.jpg" "$MNT/linked.jpg" "$MNT/data.jpg"
                [ ! -e "$MNT/.sh_thumbnails" ] || fail ".sh_thumbnails stayed with no image left"
                unmount_vault
                [ "$(thumbs_on_disk)" = 0 ] || fail "thumbnail files stayed after unlink"
                no_plaintext
                """)
    }

    func testPutThumbnailCommandAndRebuild() throws {
        try mv.inPrivateNamespace(
            ThumbnailTests.helpers + """
                make_image sines 640 480 "$ROOT/a.webp"
                "$VAULTAIRE" put "$VAULT" "$ROOT/a.webp" /a.webp --passphrase-file "$PW" --quiet
                "$VAULTAIRE" thumbnail "$VAULT" /a.webp "$ROOT/out.png" --passphrase-file "$PW"
                [ "$(dims "$ROOT/out.png")" = 256x192 ] || fail "large: $(dims "$ROOT/out.png")"
                "$VAULTAIRE" thumbnail "$VAULT" /a.webp "$ROOT/n.png" --size normal --passphrase-file "$PW"
                [ "$(dims "$ROOT/n.png")" = 128x96 ] || fail "normal: $(dims "$ROOT/n.png")"
                below "$(mae "$ROOT/out.png" "$ROOT/a.webp")" 4 || fail "thumbnail unlike its source"
                # HEIF (AVIF, with libheif's AV1 encoder) and TIFF, also named unlike what they hold.
                make_image zone 480 640 "$ROOT/h.avif"; mv "$ROOT/h.avif" "$ROOT/h.bin"
                make_image sines 480 640 "$ROOT/t.tif"
                "$VAULTAIRE" put "$VAULT" "$ROOT/h.bin" /h.bin --passphrase-file "$PW" --quiet
                "$VAULTAIRE" put "$VAULT" "$ROOT/t.tif" /t.tif --passphrase-file "$PW" --quiet
                for f in h.bin t.tif; do
                  "$VAULTAIRE" thumbnail "$VAULT" "/$f" "$ROOT/$f.png" --passphrase-file "$PW"
                  [ "$(dims "$ROOT/$f.png")" = 192x256 ] || fail "$f: $(dims "$ROOT/$f.png")"
                done
                set +e
                "$VAULTAIRE" thumbnail "$VAULT" /missing.jpg "$ROOT/x.png" --passphrase-file "$PW" 2> "$ROOT/err"; code=$?
                set -e
                [ $code = 17 ] || fail "missing file: exit $code"
                grep -q '/missing.jpg' "$ROOT/err" || fail "names the path: $(cat "$ROOT/err")"
                # A vault whose thumbnails are gone (made before thumbnails existed): rebuilt.
                rm -rf "$VAULT/thumbs"/*
                set +e
                "$VAULTAIRE" thumbnail "$VAULT" /a.webp "$ROOT/x.png" --passphrase-file "$PW" 2> /dev/null; code=$?
                set -e
                [ $code = 17 ] || fail "no thumbnail: exit $code"
                "$VAULTAIRE" thumbnails "$VAULT" --rebuild --passphrase-file "$PW" > "$ROOT/out" 2> "$ROOT/err"
                grep -q 'Made thumbnails of 3 of 3 files' "$ROOT/out" || fail "rebuild: $(cat "$ROOT/out" "$ROOT/err")"
                "$VAULTAIRE" thumbnail "$VAULT" /a.webp "$ROOT/again.png" --passphrase-file "$PW"
                [ "$(dims "$ROOT/again.png")" = 256x192 ] || fail "rebuilt: $(dims "$ROOT/again.png")"
                "$VAULTAIRE" verify "$VAULT" --passphrase-file "$PW" > /dev/null 2>&1 || fail "verify after rebuild"
                # --no-thumbnails: none made, none shown.
                mount_vault --no-thumbnails
                [ ! -e "$MNT/.sh_thumbnails" ] || fail ".sh_thumbnails shown with --no-thumbnails"
                cp "$ROOT/a.webp" "$MNT/b.webp"
                sleep 2
                unmount_vault
                [ "$(thumbs_on_disk)" = 3 ] || fail "a thumbnail was made with --no-thumbnails"
                no_plaintext
                """)
    }

    /// A file rewritten under a new content key (its key past the seal budget, lowered here with
    /// VAULTAIRE_TEST_SEAL_LIMIT) gets a new blob; its thumbnail, bound to the blob, comes along.
    func testAFileRewrittenUnderANewKeyKeepsItsThumbnail() throws {
        try mv.inPrivateNamespace(
            ThumbnailTests.helpers + """
                # Noise, so that the PNG spans many chunks (many seals).
                vips gaussnoise "$ROOT/n.v" 640 480 && vips cast "$ROOT/n.v" "$ROOT/a.png" uchar
                "$VAULTAIRE" put "$VAULT" "$ROOT/a.png" /a.png --passphrase-file "$PW" --quiet
                before=$(find "$VAULT/blobs" -type f -printf '%f\\n' | sort)
                "$VAULTAIRE" thumbnail "$VAULT" /a.png "$ROOT/before.png" --passphrase-file "$PW" \\
                  || fail "no thumbnail after put"
                VAULTAIRE_TEST_SEAL_LIMIT=2 "$VAULTAIRE" mkdir "$VAULT" /d --passphrase-file "$PW" || fail "mkdir"
                after=$(find "$VAULT/blobs" -type f -printf '%f\\n' | sort)
                [ "$before" != "$after" ] || fail "the file was not rewritten (same blob $after)"
                "$VAULTAIRE" thumbnail "$VAULT" /a.png "$ROOT/after.png" --passphrase-file "$PW" \\
                  || fail "the rewrite lost the thumbnail"
                cmp -s "$ROOT/before.png" "$ROOT/after.png" || fail "the thumbnail changed in the rewrite"
                [ "$(thumbs_on_disk)" = 1 ] || fail "thumbnail files: $(thumbs_on_disk), expected 1"
                "$VAULTAIRE" verify "$VAULT" --passphrase-file "$PW" > "$ROOT/verify" 2>&1 || fail "verify: $(cat "$ROOT/verify")"
                grep -q 'all intact' "$ROOT/verify" || fail "verify: $(cat "$ROOT/verify")"
                no_plaintext
                """)
    }

    func testTamperedThumbnailsAreRefusedAndNamedByVerify() throws {
        try mv.inPrivateNamespace(
            ThumbnailTests.helpers + """
                make_image sines 400 300 "$ROOT/a.jpg"
                make_image zone 400 300 "$ROOT/b.jpg"
                make_image sines 300 400 "$ROOT/c.gif"
                mount_vault
                cp "$ROOT/a.jpg" "$ROOT/b.jpg" "$ROOT/c.gif" "$MNT/"
                wait_for "$(large a.jpg)"; wait_for "$(large b.jpg)"; wait_for "$(large c.gif)"
                "$VAULTAIRE" verify "$VAULT" --passphrase-file "$PW" > /dev/null 2>&1 || true
                unmount_vault
                "$VAULTAIRE" verify "$VAULT" --passphrase-file "$PW" > /dev/null 2>&1 || fail "intact vault fails verify"
                # Which thumbnail file is whose: the blob's name (thumbs/XX/… mirrors blobs/XX/…); list
                # the files of the vault in creation order through the index is not possible without keys,
                # so tamper with two of the three and expect exactly two refusals.
                files=($(find "$VAULT/thumbs" -type f | sort))
                [ ${#files[@]} = 3 ] || fail "${#files[@]} thumbnail files"
                python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(40); b = f.read(1); f.seek(40); f.write(bytes([b[0] ^ 0xFF]))' "${files[0]}"
                cp "${files[2]}" "${files[1]}"   # another file's (authentic) thumbnail swapped in
                mount_vault
                refused=0
                for name in a.jpg b.jpg c.gif; do
                  if cat "$(large "$name")" > /dev/null 2> "$ROOT/err"; then continue; fi
                  grep -q 'Input/output error' "$ROOT/err" || fail "$name: not EIO: $(cat "$ROOT/err")"
                  refused=$((refused + 1))
                done
                [ $refused = 2 ] || fail "$refused tampered thumbnails refused, not 2"
                unmount_vault
                set +e
                "$VAULTAIRE" verify "$VAULT" --passphrase-file "$PW" > "$ROOT/out" 2>&1; code=$?
                set -e
                [ $code = 13 ] || fail "verify: exit $code: $(cat "$ROOT/out")"
                [ "$(grep -c '^DAMAGED /.*thumbnail' "$ROOT/out")" = 2 ] || fail "verify: $(cat "$ROOT/out")"
                # An orphaned thumbnail (no file names its blob) is named too.
                mkdir -p "$VAULT/thumbs/ab" && cp "${files[2]}" "$VAULT/thumbs/ab/cdef0123456789abcdef0123456789"
                "$VAULTAIRE" verify "$VAULT" --passphrase-file "$PW" > "$ROOT/out" 2>&1 || true
                grep -q 'thumbs/ab/cdef0123456789abcdef0123456789' "$ROOT/out" || fail "orphan: $(cat "$ROOT/out")"
                """)
    }

    /// A 60-megapixel JPEG (shrink-on-load keeps the daemon's memory small), one over the 100 MP cap
    /// (skipped from its header, with a notice) and a corrupt JPEG (no thumbnail, a notice, no crash).
    func testLargeAndCorruptImagesKeepTheDaemonSmallAndAlive() throws {
        let r = try mv.inPrivateNamespace(
            ThumbnailTests.helpers + """
                make_image sines 9000 6700 "$ROOT/gray.v"
                vips bandjoin "$ROOT/gray.v $ROOT/gray.v $ROOT/gray.v" "$ROOT/rgb.v"
                vips copy "$ROOT/rgb.v" "$ROOT/big.jpg" --interpretation srgb
                rm "$ROOT/gray.v" "$ROOT/rgb.v"
                vips black "$ROOT/huge.jpg" 12000 9000
                { head -c 600 "$ROOT/big.jpg"; head -c 200000 /dev/urandom; } > "$ROOT/corrupt.jpg"
                "$VAULTAIRE" mount "$VAULT" "$MNT" --passphrase-file "$PW" -f 2> "$ROOT/daemon.log" &
                daemon=$!
                for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
                mountpoint -q "$MNT" || fail "not mounted: $(cat "$ROOT/daemon.log")"
                ls "$MNT" > /dev/null
                echo "baseline RSS kB: $(awk '/VmHWM/ { print $2 }' /proc/$daemon/status)"
                cp "$ROOT/corrupt.jpg" "$ROOT/huge.jpg" "$ROOT/big.jpg" "$MNT/"
                wait_for "$(large big.jpg)"
                [ "$(dims "$(large big.jpg)")" = 256x190 ] || fail "big: $(dims "$(large big.jpg)")"
                below "$(mae "$(large big.jpg)" "$ROOT/big.jpg")" 4 || fail "big thumbnail unlike its source"
                [ ! -e "$(large corrupt.jpg)" ] || fail "a thumbnail of a corrupt JPEG"
                [ ! -e "$(large huge.jpg)" ] || fail "a thumbnail beyond the cap"
                kill -0 $daemon || fail "the daemon died"
                echo "peak RSS kB: $(awk '/VmHWM/ { print $2 }' /proc/$daemon/status)"
                echo "big source bytes: $(stat -c %s "$ROOT/big.jpg")"
                fusermount3 -u "$MNT"; wait $daemon || fail "daemon exit status $?"
                grep -q 'no thumbnail for /corrupt.jpg: image cannot be decoded' "$ROOT/daemon.log" \\
                  || fail "no notice for the corrupt JPEG: $(cat "$ROOT/daemon.log")"
                grep -q 'no thumbnail for /huge.jpg: image of 12000×9000 pixels exceeds the 100-megapixel limit' \\
                  "$ROOT/daemon.log" || fail "no notice for the huge image: $(cat "$ROOT/daemon.log")"
                no_plaintext
                """)
        func figure(_ label: String) throws -> Int {
            let line = r.stdout.split(separator: "\n").first { $0.hasPrefix(label + ": ") }
            return try XCTUnwrap(line.flatMap { Int($0.dropFirst(label.count + 2)) }, "\(label) in \(r.stdout)")
        }
        let baseline = try figure("baseline RSS kB")
        let peak = try figure("peak RSS kB")
        let sourceKB = try figure("big source bytes") / 1024
        // Decoded whole, the 60 MP sRGB image would take 180 MB. The daemon holds the file (secure
        // memory), a few rows, and the image shrunk on load (1/8: about 3 MB).
        XCTAssertLessThan(
            peak - baseline, sourceKB + 40_000,
            "daemon peak RSS \(peak) kB, \(baseline) kB before (source \(sourceKB) kB)")
        print("ThumbnailTests: daemon peak RSS \(peak) kB (\(baseline) kB before) with a 60 MP JPEG of \(sourceKB) kB")
    }

    /// The thumbnailer's thread ran (a file was written again after a close, so it was looked at) but
    /// never made a thumbnail: unmount still saves and confirms (it once crashed freeing libvips'
    /// thread state that was never made).
    func testUnmountAfterOnlyNonImagesSavesAndConfirms() throws {
        try mv.mount()
        try mv.shell("touch empty && echo text > note.txt && echo more >> note.txt")
        try mv.unmount()
        try mv.verify()
    }
}
