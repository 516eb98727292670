import Foundation
import TestSupport
import XCTest

final class KillTests: MountTestCase {
    /// SIGKILL the mount at random points of a mixed workload, 100 times. After each kill the vault
    /// remounts and verifies, and every file whose fsync had returned is intact.
    func testHundredKillsLoseNothingFsynced() throws {
        let script = """
            set -u
            V='\(mv.vault)'; M='\(mv.mountpoint)'; PW='\(mv.passphraseFile)'; B='\(mv.binary)'; W='\(mv.root)/kill'
            mkdir -p "$W"; : > "$W/committed"
            trials=0; lost=0; unverified=0
            for t in $(seq 1 100); do
              "$B" mount "$V" "$M" --passphrase-file "$PW" >/dev/null || { echo "mount failed in trial $t"; exit 3; }
              ( cd "$M"; mkdir -p d$((t % 7)); i=0
                while true; do
                  i=$((i+1)); f="d$((t % 7))/f$t-$i"
                  head -c $(( (RANDOM * 7) % 150000 + 1 )) /dev/urandom > "$W/src" || exit 0
                  cp "$W/src" "$f" 2>/dev/null || exit 0
                  echo "rewrite" >> "d$((t % 7))/log" 2>/dev/null || exit 0
                  mv "$f" "$f.done" 2>/dev/null || exit 0
                  sync "$f.done" 2>/dev/null || exit 0
                  echo "$f.done $(cksum < "$W/src")" >> "$W/committed"
                done ) &
              wl=$!
              sleep 0.0$(( RANDOM % 9 + 1 ))
              pkill -KILL -f "vaultaire mount $V " ; kill -KILL $wl 2>/dev/null; wait $wl 2>/dev/null
              fusermount3 -uz "$M" 2>/dev/null
              trials=$((trials+1))
              "$B" mount "$V" "$M" --passphrase-file "$PW" >/dev/null 2>&1 || { echo "remount failed in trial $t"; exit 4; }
              while read -r f sum size; do
                [ "$(cksum < "$M/$f" 2>/dev/null)" = "$sum $size" ] || { lost=$((lost+1)); echo "lost $f"; }
              done < "$W/committed"
              "$B" unmount "$M" >/dev/null || exit 5
              "$B" verify "$V" --passphrase-file "$PW" >/dev/null 2>&1 || { unverified=$((unverified+1)); echo "verify failed after trial $t"; }
            done
            echo "kill trials: $trials, fsynced files checked: $(wc -l < "$W/committed"), lost: $lost, failed verifications: $unverified"
            [ $lost -eq 0 ] || exit 6
            [ $unverified -eq 0 ] || exit 7
            """
        let r = try mv.execute("/bin/bash", ["-c", script])
        print(r.stdout.split(separator: "\n").first { $0.hasPrefix("kill trials") } ?? "no summary")
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("kill trials: 100,"), r.stdout)
        XCTAssertTrue(r.stdout.contains("lost: 0, failed verifications: 0"), r.stdout)
    }
}
