import Foundation
import XCTest

/// Format v2 through a real mount: padded blob lengths at the edges, one host block for a small file,
/// and sparse files made by `truncate` staying sparse in the vault.
final class PaddingAndHolesTests: MountTestCase {
    func testPaddedSizesAndSparseFilesThroughTheMount() throws {
        try mv.mount()
        let sizes = [0, 1, 255, 256, 257, 3976, 3977, 4095, 4096, 4097, 8193]
        var script = ""
        for s in sizes { script += "head -c \(s) /dev/urandom > f\(s); cp f\(s) ../plain\(s)\n" }
        try mv.shell(script)
        try mv.shell(
            """
            truncate -s 3G sparse
            [ "$(stat -c %s sparse)" = 3221225472 ]
            printf data | dd of=sparse bs=1 seek=1073741824 conv=notrunc status=none
            sync
            """)
        try mv.unmount()
        // Blob lengths as FORMAT.md gives them: 92 + 28 n + padded length (92 for an empty file).
        func padme(_ l: Int) -> Int {
            let e = Int.bitWidth - 1 - l.leadingZeroBitCount
            let s = Int.bitWidth - 1 - e.leadingZeroBitCount + 1
            let mask = (1 << (e - s)) - 1
            return (l + mask) & ~mask
        }
        let expected = Set(
            sizes.map { s -> Int in
                guard s > 0 else { return 92 }
                let n = (s + 4095) / 4096
                return 92 + 28 * n + min(n * 4096, padme(max(s, 256)))
            })
        let found = Set(mv.blobSizes().map(\.size))
        XCTAssertTrue(expected.isSubset(of: found), "expected \(expected.sorted()), found \(found.sorted())")
        // The sparse file's blob: 3 GiB long, hardly anything allocated.
        let big = try XCTUnwrap(mv.blobSizes().first { $0.size > 3 << 30 })
        var st = stat()
        XCTAssertEqual(stat(mv.vault + "/blobs/" + big.name, &st), 0)
        XCTAssertLessThan(st.st_blocks * 512, 1 << 20, "truncate -s 3G takes almost nothing on disk")
        // The one-byte file's blob takes one host block.
        let small = try XCTUnwrap(mv.blobSizes().first { $0.size == 92 + 28 + 256 })
        XCTAssertEqual(stat(mv.vault + "/blobs/" + small.name, &st), 0)
        XCTAssertLessThanOrEqual(st.st_blocks * 512, 4096)
        try mv.mount()
        var check = ""
        for s in sizes { check += "cmp f\(s) ../plain\(s)\n" }
        check += """
            [ "$(dd if=sparse bs=1 skip=1073741824 count=4 status=none)" = data ]
            [ "$(dd if=sparse bs=4096 skip=600000 count=1 status=none | tr -d '\\0' | wc -c)" = 0 ]
            """
        try mv.shell(check)
        try mv.unmount()
        try mv.verify()
    }
}
