import XCTest

@testable import VaultFormat

/// The names sync clients give the copies they keep beside a file they could not merge.
final class SyncConflictNameTests: XCTestCase {
    func testEachClientsNamesLeadBackToTheOriginal() {
        let table: [(copy: String, original: String)] = [
            ("journal.sync-conflict-20261204-101010-ABCDEFG", "journal"),  // Syncthing
            ("vault.sync-conflict-20261204-101010-ABCDEFG.header", "vault.header"),
            ("mount.sync-conflict-20261204-101010-ABCDEFG.lock", "mount.lock"),
            ("vault.header (host's conflicted copy 2026-12-04)", "vault.header"),  // Dropbox
            ("vault (host's conflicted copy 2026-12-04).header", "vault.header"),
            ("journal (host's conflicted copy 2026-12-04 (1))", "journal"),
            ("journal (conflicted copy 2026-12-04 101010)", "journal"),  // Nextcloud, ownCloud
            ("journal (Conflicted Copy 2026-12-04 101010)", "journal"),
            ("journal_conflict-20261204-101010", "journal"),  // older ownCloud
            ("vault_conflict-20261204-101010.header", "vault.header"),
            ("journal.conflict", "journal"),  // other tools
            ("journal.conflict-2", "journal"),
            ("0b190d69bb09d88480cc1ab5e8e50c.sync-conflict-20261204-101010-ABCDEFG", "0b190d69bb09d88480cc1ab5e8e50c"),
        ]
        for (copy, original) in table {
            XCTAssertEqual(SyncConflict.originalName(of: copy), original, copy)
        }
    }

    func testTheVaultsOwnNamesAreNoConflictCopies() {
        for name in [
            "vault.header", "vault.header.tmp", "journal", "snapshot.tmp", "mount.lock",
            "0b190d69bb09d88480cc1ab5e8e50c",
            ".keep", "journal.conflicted", "notes (copy)", ".sync-conflict-20261204-101010-ABCDEFG",
            "(conflicted copy)",
        ] {
            XCTAssertNil(SyncConflict.originalName(of: name), name)
        }
    }

    func testACopyIsKnownByWhatItHolds() {
        let id = [UInt8](hex: "160b190d69bb09d88480cc1ab5e8e50c")!
        let table: [(directory: String, original: String, holds: SyncConflict.Original)] = [
            ("", "vault.header", .header),
            ("", "mount.lock", .lockFile),
            ("index", "snapshot", .snapshot),
            ("index", "journal", .journal),
            ("blobs/16", "0b190d69bb09d88480cc1ab5e8e50c", .blob(id)),
            ("thumbs/16", "0b190d69bb09d88480cc1ab5e8e50c", .thumbnail(id)),
            ("index", "journal.tmp", .other),
            ("", "index", .other),
            ("blobs", "16", .other),
        ]
        for (directory, original, holds) in table {
            let copy = SyncConflict(directory: directory, name: original + ".conflict", original: original)
            XCTAssertEqual(copy.original, holds, "\(directory)/\(original)")
        }
    }
}
