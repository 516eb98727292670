import VaultSystem
import XCTest

final class MountTableTests: XCTestCase {
    /// Optional fields before the dash, octal escapes in the mountpoint and source, and a later mount
    /// on the same place hiding the earlier one — the one the mount process must pick for its window.
    func testParsesMountinfoAndPicksTheVisibleMount() {
        let text = """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
            40 22 0:38 / /tmp/my\\040vault rw,nosuid,nodev,relatime shared:20 - fuse.vaultaire /srv/a\\134b\\040v rw,user_id=0
            41 40 0:41 / /tmp/my\\040vault ro,nosuid,nodev,relatime - fuse.vaultaire /srv/other ro,user_id=0
            broken line
            """
        let entries = MountTable.parse(text)
        XCTAssertEqual(entries.map(\.device), ["8:1", "0:38", "0:41"])
        XCTAssertEqual(entries[1].mountpoint, "/tmp/my vault")
        XCTAssertEqual(entries[1].source, "/srv/a\\b v")
        XCTAssertEqual(entries[1].fileSystemType, "fuse.vaultaire")
        XCTAssertFalse(entries[1].readOnly)
        XCTAssertTrue(entries[2].readOnly)
        XCTAssertEqual(MountTable.mount(at: "/tmp/my vault", among: entries)?.device, "0:41")
        XCTAssertNil(MountTable.mount(at: "/tmp/my", among: entries))
    }

    /// The mounts this process sees include the root file system.
    func testReadsThisProcesssMounts() {
        XCTAssertTrue(MountTable.entries().contains { $0.mountpoint == "/" })
    }
}
