import Foundation
import XCTest

/// The Debian package (issue 26.8): scripts/package-deb.sh builds it, lintian finds nothing to say
/// about it, it installs with dpkg into a throwaway root whose package database is a copy of this
/// machine's (so its Depends are checked against what is really installed, without
/// --force-depends), works from there, and purges cleanly.
final class DebianPackageTests: XCTestCase {
    func testBuildInstallUseAndPurge() throws {
        let w = try CLIWorld()
        let script = """
            set -euo pipefail
            fail() { echo "FAIL: $*" >&2; exit 1; }
            cd "$REPOSITORY"
            deb=$(OUT="$ROOT/dist" scripts/package-deb.sh 2> "$ROOT/build.log") || { tail -20 "$ROOT/build.log" >&2; fail "package-deb.sh"; }
            version=$("$VAULTAIRE" --version | sed -n '1s/^vaultaire //p')
            [ "$deb" = "$ROOT/dist/vaultaire_${version}_$(dpkg --print-architecture).deb" ] || fail "package path: $deb"
            [ -f "$deb" ] || fail "no package at $deb"

            depends=$(dpkg-deb -f "$deb" Depends)
            for p in libc6 libfuse3-3 libssl3 libsecret-1-0 liburing2 libglib2.0-0 libvips42 fuse3 python3-mnemonic; do
              echo "$depends" | grep -Eq "(^|, )$p( |,|$)" || fail "Depends lacks $p: $depends"
            done
            if echo "$depends" | grep -q swift; then fail "Depends on a Swift runtime: $depends"; fi
            lintian_says=$(lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v 'running with root privileges' || true)
            [ -z "$lintian_says" ] || fail "lintian: $lintian_says"

            # A throwaway root with this machine's package database.
            target="$ROOT/target"
            mkdir -p "$target/var/lib/dpkg/info" "$target/var/lib/dpkg/updates"
            cp /var/lib/dpkg/status "$target/var/lib/dpkg/status"
            dpkg-query -W -f='${binary:Package}\\n' | while read -r p; do : > "$target/var/lib/dpkg/info/$p.list"; done
            dpkg --root="$target" -i "$deb" > "$ROOT/install.log" 2>&1 || { cat "$ROOT/install.log" >&2; fail "dpkg -i"; }
            [ "$(dpkg --root="$target" -s vaultaire | sed -n 's/^Status: //p')" = "install ok installed" ] || fail "not installed"

            installed_version=$("$target/usr/bin/vaultaire" --version)
            [ "$installed_version" = "$("$VAULTAIRE" --version)" ] || fail "installed --version: $installed_version"
            if ldd "$target/usr/bin/vaultaire" | grep -q swift; then fail "the binary needs a Swift runtime"; fi
            [ "$(MANPATH="$target/usr/share/man" man -w vaultaire)" = "$target/usr/share/man/man1/vaultaire.1.gz" ] || fail "man -w vaultaire"
            [ "$(MANPATH="$target/usr/share/man" man -w 5 vaultaire-format)" = "$target/usr/share/man/man5/vaultaire-format.5.gz" ] || fail "man -w 5 vaultaire-format"
            warnings=$(MANWIDTH=80 man --warnings -l "$target/usr/share/man/man1/vaultaire.1.gz" 2>&1 >/dev/null)
            [ -z "$warnings" ] || fail "man warnings: $warnings"
            bash -n "$target/usr/share/bash-completion/completions/vaultaire" || fail "bash completion"
            zsh -n "$target/usr/share/zsh/vendor-completions/_vaultaire" || fail "zsh completion"
            fish -n "$target/usr/share/fish/vendor_completions.d/vaultaire.fish" || fail "fish completion"
            [ "$(readlink "$target/usr/sbin/mount.fuse.vaultaire")" = mount.fuse3 ] || fail "mount helper link"
            [ -x /usr/sbin/mount.fuse3 ] || fail "the link's target, from fuse3"
            grep -q '^Type=notify$' "$target/usr/lib/systemd/user/vaultaire@.service" || fail "systemd unit"
            [ -f "$target/usr/share/doc/vaultaire/README.md.gz" ] || fail "README"
            [ -f "$target/usr/share/doc/vaultaire/FORMAT.md.gz" ] || fail "FORMAT.md"
            [ -f "$target/usr/share/doc/vaultaire/copyright" ] || fail "copyright"

            dpkg --root="$target" --purge vaultaire > "$ROOT/purge.log" 2>&1 || { cat "$ROOT/purge.log" >&2; fail "dpkg --purge"; }
            if dpkg --root="$target" -s vaultaire > /dev/null 2>&1; then fail "still known after purge"; fi
            left=$(find "$target" -path "$target/var" -prune -o ! -type d -print)
            [ -z "$left" ] || fail "left after purge: $left"
            echo "package ok: $deb"
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", script]
        p.environment = ProcessInfo.processInfo.environment.merging(
            ["REPOSITORY": DocumentationTests.repository, "ROOT": w.root, "VAULTAIRE": w.binary]) { $1 }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, String(decoding: o, as: UTF8.self) + String(decoding: e, as: UTF8.self))
        XCTAssertTrue(String(decoding: o, as: UTF8.self).contains("package ok: "))
    }
}
