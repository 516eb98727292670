import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// The tamper campaign over a small vault: bit flips in every file (all bits of small files, a sample
/// of larger ones), deletion, truncation, duplication, swapping and rollback of whole files. Each case
/// is detected (the vault refuses to open, or `verify` names damage) or is one of the limits listed in
/// docs/SECURITY.md; wrong plaintext is never returned.
final class TamperCampaignTests: XCTestCase {
    enum Outcome { case detected, documented, undetected, wrongPlaintext }

    func testCampaign() throws {
        let tv = try TestVault()
        var v = try tv.open()
        try v.writeFile("/a.txt", Array("first version of a".utf8))
        try v.makeNode(in: Inode.rootID, name: "dir", kind: .directory, permissions: 0o755, caller: .current)
        try v.writeFile("/dir/b.bin", randomBytes(9000))
        try v.writeFile("/dir/empty", [])
        try v.close()
        let layout = VaultLayout(root: tv.path)
        let old = try files(layout)  // an older, authentic state, for rollbacks
        v = try tv.open()
        try v.writeFile("/a.txt", Array("second version of a, longer".utf8))
        try v.writeFile("/dir/c.txt", Array("added later".utf8))
        try v.close()
        let current = try files(layout)
        let expected = try contents(tv)
        let master = try VaultAccess.unwrapMasterKey(at: tv.path, credential: tv.credential(), keychain: tv.keychain)
        let masterBytes = master.withUnsafeBytes { Array($0) }

        var counts: [Outcome: Int] = [:]
        var tried = 0
        func run(
            _ name: String, _ change: () throws -> Void, documentedIfUndetected: Bool = false, fullUnlock: Bool = false
        ) throws {
            try restore(current, layout)
            try change()
            var outcome = Outcome.detected
            do {
                let key =
                    fullUnlock
                    ? try VaultAccess.unwrapMasterKey(at: tv.path, credential: tv.credential(), keychain: tv.keychain)
                    : SecureBytes(copying: masterBytes)
                let vault = try VaultAccess.open(at: tv.path, master: key, keychain: tv.keychain, readOnly: true)
                defer { try? vault.close() }
                let intact =
                    vault.verify(scanForStrayBlobs: false).isIntact && vault.notices.isEmpty && !vault.headerDamaged
                var wrong = false
                for (path, data) in expected {
                    if let got = try? vault.readFile(path), got != data { wrong = true }
                }
                if wrong {
                    outcome = .wrongPlaintext
                } else if !intact {
                    outcome = .detected
                } else {
                    outcome = documentedIfUndetected ? .documented : .undetected
                }
            } catch {
                outcome = .detected
            }
            if outcome == .undetected || outcome == .wrongPlaintext { XCTFail("\(name): \(outcome)") }
            counts[outcome, default: 0] += 1
            tried += 1
        }

        var rng = SystemRandomNumberGenerator()
        for (path, bytes) in current.sorted(by: { $0.key < $1.key }) {
            let isHeader = path == VaultHeader.fileName
            let bits =
                bytes.count * 8 <= 4096
                ? Array(0..<bytes.count * 8) : (0..<600).map { _ in Int.random(in: 0..<bytes.count * 8, using: &rng) }
            // Upper bytes of the header's iteration counts only make the KDF slower before the AAD check
            // fails (HeaderTests shows the binding with the low bytes); they are left out to stay fast.
            let slow: Set<Int> = isHeader ? [25, 26, 27, 125, 126, 127] : []
            for bit in bits where !slow.contains(bit / 8) {
                // Every bit of a version-2 header is covered by its checksum and MAC: none is documented.
                try run(
                    "flip \(path) bit \(bit)",
                    {
                        var b = bytes
                        b[bit / 8] ^= 1 << (bit % 8)
                        try FileSystem.replaceFile(layout.root + "/" + path, with: b)
                    }, fullUnlock: isHeader)
            }
            try run("delete \(path)", { try FileSystem.remove(layout.root + "/" + path) })
            try run(
                "truncate \(path) by one byte",
                { try FileSystem.replaceFile(layout.root + "/" + path, with: Array(bytes.dropLast())) })
            try run(
                "truncate \(path) to half",
                { try FileSystem.replaceFile(layout.root + "/" + path, with: Array(bytes.prefix(bytes.count / 2))) })
            try run(
                "extend \(path)",
                { try FileSystem.replaceFile(layout.root + "/" + path, with: bytes + bytes.suffix(64)) })
        }
        let blobs = current.keys.filter { $0.hasPrefix("blobs/") }.sorted()
        for a in blobs {
            for b in blobs where a < b {
                try run(
                    "duplicate \(b) over \(a)", { try FileSystem.replaceFile(layout.root + "/" + a, with: current[b]!) }
                )
                try run(
                    "swap \(a) and \(b)",
                    {
                        try FileSystem.replaceFile(layout.root + "/" + a, with: current[b]!)
                        try FileSystem.replaceFile(layout.root + "/" + b, with: current[a]!)
                    })
            }
        }
        for (path, bytes) in old where current[path] != bytes {
            // An older authentic blob of the same file (same key, same positions) cannot be told apart:
            // a documented limit. Older index files are caught by the generation in the keychain.
            try run(
                "roll back \(path)", { try FileSystem.replaceFile(layout.root + "/" + path, with: bytes) },
                documentedIfUndetected: path.hasPrefix("blobs/"))
        }
        try run(
            "roll back the whole index",
            {
                for p in ["index/snapshot", "index/journal"] {
                    try FileSystem.replaceFile(layout.root + "/" + p, with: old[p]!)
                }
            })
        try restore(current, layout)
        print(
            "tamper campaign: \(tried) cases tried, \(counts[.detected] ?? 0) detected, \(counts[.documented] ?? 0) documented-undetectable, \(counts[.undetected] ?? 0) undetected, \(counts[.wrongPlaintext] ?? 0) wrong plaintext"
        )
        XCTAssertEqual(counts[.wrongPlaintext] ?? 0, 0)
        XCTAssertEqual(counts[.undetected] ?? 0, 0)
    }

    func files(_ layout: VaultLayout) throws -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [VaultHeader.fileName: try FileSystem.readFile(layout.header)]
        for p in ["index/snapshot", "index/journal"] { out[p] = try FileSystem.readFile(layout.root + "/" + p) }
        for id in try layout.blobIDsOnDisk() {
            let path = layout.blobPath(id)
            out[String(path.dropFirst(layout.root.count + 1))] = try FileSystem.readFile(path)
        }
        return out
    }

    func restore(_ files: [String: [UInt8]], _ layout: VaultLayout) throws {
        for (p, b) in files {
            let full = layout.root + "/" + p
            if (try? FileSystem.readFile(full)) != b { try FileSystem.replaceFile(full, with: b) }
        }
    }

    func contents(_ tv: TestVault) throws -> [String: [UInt8]] {
        let v = try tv.open(readOnly: true)
        defer { try? v.close() }
        var out: [String: [UInt8]] = [:]
        for p in ["/a.txt", "/dir/b.bin", "/dir/empty", "/dir/c.txt"] { out[p] = try v.readFile(p) }
        return out
    }
}
