import Foundation
import VaultSystem
import XCTest

@testable import VaultCrypto
@testable import VaultFormat

/// docs/FORMAT.md's "Test vectors", which a second implementation is written from. The rows are read
/// from the document and each one's output is computed here by this implementation: the document is
/// the expected value, the code computes. A row with no computation fails, and so does a computation
/// whose row is gone, so the table can never hold a vector that nothing checks.
final class FormatVectorTests: XCTestCase {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/FORMAT.md")

    override func setUp() {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)  // the vectors run their KDFs at 1,000 iterations
    }

    private func documentedRows() throws -> [VectorTable.Row] {
        try VectorTable.rows(inDocument: String(contentsOf: FormatVectorTests.document, encoding: .utf8))
    }

    func testDocumentedVectors() throws {
        let rows = try documentedRows()
        let computations = try FormatVectors().computations
        let byInput = Dictionary(computations, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(byInput.count, computations.count, "two computations for one input")
        var seen: Set<String> = []
        for row in rows {
            XCTAssertTrue(seen.insert(row.input).inserted, "FORMAT.md line \(row.line): a second row \"\(row.input)\"")
            guard let compute = byInput[row.input] else {
                XCTFail("FORMAT.md line \(row.line): no computation in FormatVectors for the row \"\(row.input)\"")
                continue
            }
            XCTAssertEqual(try compute().hex, row.output.hex, "FORMAT.md line \(row.line): \(row.input)")
        }
        for (input, _) in computations where !seen.contains(input) {
            XCTFail("FormatVectors computes \"\(input)\", which has no row in FORMAT.md's test vectors")
        }
    }

    /// The documented header is one this implementation reads: it parses, its MAC and checksum verify,
    /// and both the slot and the recovery envelope open to the master key.
    func testDocumentedHeaderOpens() throws {
        let rows = try documentedRows()
        let row = try XCTUnwrap(rows.first { $0.input == FormatVectors.headerInput })
        let header = try VaultHeader(decoding: row.output)
        XCTAssertEqual(header.version, 2)
        XCTAssertTrue(header.checksumMatches, "the documented checksum")
        XCTAssertTrue(header.isAuthentic(master: FormatVectors.master), "the documented MAC")
        XCTAssertEqual(header.slots.map(\.name), [FormatVectors.deviceName])
        let vectors = try FormatVectors()
        XCTAssertEqual(
            try header.unlock(credential: vectors.passphrase, deviceSalt: FormatVectors.deviceSalt),
            FormatVectors.master)
        XCTAssertEqual(try header.unlock(recoveryPhrase: vectors.recoveryPhrase), FormatVectors.master)
    }

    func testOutputNotation() throws {
        XCTAssertEqual(try VectorTable.bytes(ofOutput: "`0a` ‖ 3 × `ff` ‖ `0102`"), [0x0a, 0xff, 0xff, 0xff, 1, 2])
        for bad in ["0a", "`0g`", "`0A`", "3 x `ff`", "3 × `ffff`", "0 × `ff`", "`0a`‖`0b`", "``"] {
            XCTAssertThrowsError(try VectorTable.bytes(ofOutput: bad), bad)
        }
    }
}

/// What each row of the table computes, by the row's input text exactly as the document writes it.
/// The inputs the rows share are the document's ("Test vectors", the list before the tables).
struct FormatVectors {
    static let master = SecureBytes(copying: Array(0..<32) as [UInt8])
    static let vaultID = [UInt8](repeating: 0xaa, count: 16)
    static let blobID = [UInt8](repeating: 0xbb, count: 16)
    static let inodeID: UInt64 = 5
    static let chunkSizeLog2: UInt8 = 12
    static let deviceSalt = SecureBytes(copying: [UInt8](repeating: 0x11, count: 32))
    static let iterations = 1000
    static let deviceName = "vector"
    static let headerInput = "vector header (276 bytes)"

    let keys: KeySchedule
    let passphrase = Credential.passphrase(SecureBytes(copying: Array("correct horse battery".utf8)))
    let pattern: Pattern
    let recoveryPhrase: SecureBytes
    let header: VaultHeader

    init() throws {
        keys = try KeySchedule(master: FormatVectors.master)
        pattern = try Pattern(text: "a1-b2-c3-d4")
        // Through the same check and normalization a typed phrase takes (a valid BIP-39 phrase: the
        // words of 32 zero bytes).
        recoveryPhrase = try RecoveryPhrase.validate(
            (Array(repeating: "abandon", count: 23) + ["art"]).joined(separator: " "), words: try Wordlist.load())
        header = try VaultHeader.create(
            master: FormatVectors.master, vaultID: FormatVectors.vaultID,
            recoverySalt: [UInt8](repeating: 0x44, count: 32), recoveryNonce: [UInt8](repeating: 0x55, count: 12),
            slotNonce: [UInt8](repeating: 0x66, count: 12), credential: passphrase, pattern: nil,
            deviceSalt: FormatVectors.deviceSalt, deviceName: FormatVectors.deviceName,
            iterations: FormatVectors.iterations, recoveryPhrase: recoveryPhrase,
            recoveryIterations: FormatVectors.iterations, chunkSizeLog2: FormatVectors.chunkSizeLog2,
            now: 1_700_000_000)
    }

    var computations: [(String, () throws -> [UInt8])] {
        let master = FormatVectors.master
        let vaultID = FormatVectors.vaultID
        let blobID = FormatVectors.blobID
        let salt = FormatVectors.deviceSalt
        let n = FormatVectors.iterations
        let chunkKey = SecureBytes(copying: [UInt8](repeating: 0x22, count: 32))
        let chunkNonce = [UInt8](repeating: 0x33, count: 12)
        let chunk = { (index: Int, plaintext: [UInt8]) in
            try AESGCM.seal(
                plaintext, using: chunkKey, nonce: chunkNonce,
                authenticating: FormatVectors.chunkAAD(blobID: blobID, index: index, final: true))
        }
        let wholeChunk = { try chunk(1, [UInt8](repeating: 0x41, count: 4096)) }
        // The stored plaintext of a 1-byte file's only chunk: the byte, then zeros to its padded length.
        let paddedChunk = {
            let stored = FileBlob.paddedLength(size: 1, chunkSize: 1 << FormatVectors.chunkSizeLog2, layout: 2)
            return try chunk(0, [0x78] + [UInt8](repeating: 0, count: stored - 1))
        }
        let backupEnvelope = {
            try header.makeBackupEnvelope(master: master, credential: passphrase, iterations: n)
        }
        return [
            // Keys
            ("master = `000102…1f`; index key", { keys.index.bytes }),
            ("same master; file-header key", { keys.fileHeader.bytes }),
            ("same master; thumbnail key", { keys.thumbnail.bytes }),
            (
                "same master; header-MAC key",
                { try KeyDerivation.subkey(of: master, label: VaultHeader.macLabel).bytes }
            ),
            ("that key; MAC of the bytes `abc`", { try VaultHeader.mac(of: Array("abc".utf8), master: master) }),
            (
                "passphrase `correct horse battery`, salt = 32 × `11`, N = 1000; vault key",
                { try VaultHeader.vaultKey(credential: passphrase, deviceSalt: salt, iterations: n).bytes }
            ),
            ("salt = 32 × `11`; salt ID", { try VaultHeader.saltID(of: salt) }),
            ("pattern `a1-b2-c3-d4` (4×4); credential bytes", { Credential.pattern(pattern).secret.bytes }),
            (
                "that pattern, salt = 32 × `11`, N = 1000; vault key",
                { try VaultHeader.vaultKey(credential: .pattern(pattern), deviceSalt: salt, iterations: n).bytes }
            ),
            (
                "recovery phrase (23 × `abandon`, then `art`), salt = 32 × `44`, R = 1000; recovery key",
                {
                    try VaultHeader.recoveryKey(
                        phrase: recoveryPhrase, salt: [UInt8](repeating: 0x44, count: 32), iterations: n
                    ).bytes
                }
            ),
            ("vault ID = 16 × `aa`; backup salt", { try VaultHeader.backupSalt(vaultID: vaultID) }),
            // Index, version 2 (and the version-1 record AAD)
            (
                "index key of master `000102…1f`, epoch 0; epoch key",
                { try IndexStore.epochKey(base: keys.index, epoch: 0).bytes }
            ),
            ("the same, epoch 1; epoch key", { try IndexStore.epochKey(base: keys.index, epoch: 1).bytes }),
            (
                "snapshot AAD, version 2: vault ID 16 × `aa`, last sequence number 7, epoch 3",
                {
                    IndexStore.snapshotAAD(
                        head: IndexStore.snapshotHead(vaultID: vaultID, seq: 7, epoch: 3), version: 2)
                }
            ),
            (
                "journal record AAD, version 2: vault ID 16 × `aa`, epoch 3, seq 7",
                { IndexStore.recordAAD(vaultID: vaultID, seq: 7, version: 2, epoch: 3) }
            ),
            (
                "journal record AAD, version 1: vault ID 16 × `aa`, seq 7",
                { IndexStore.recordAAD(vaultID: vaultID, seq: 7, version: 1, epoch: 0) }
            ),
            // Blobs
            (
                "chunk: key 32 × `22`, nonce 12 × `33`, blob ID 16 × `bb`, index 1, final; AAD",
                { FormatVectors.chunkAAD(blobID: blobID, index: 1, final: true) }
            ),
            ("that chunk, plaintext 4096 × `41`; first 16 ciphertext bytes", { Array(try wholeChunk().prefix(16)) }),
            ("that chunk; tag", { Array(try wholeChunk().suffix(16)) }),
            (
                "layout 2, the only chunk of a 1-byte file: key 32 × `22`, nonce 12 × `33`, blob ID 16 × `bb`, "
                    + "index 0, final; AAD",
                { FormatVectors.chunkAAD(blobID: blobID, index: 0, final: true) }
            ),
            (
                "that chunk, plaintext `78` ‖ 255 × `00` (padded to 256 bytes); first 16 ciphertext bytes",
                { Array(try paddedChunk().prefix(16)) }
            ),
            ("that 256-byte chunk; tag", { Array(try paddedChunk().suffix(16)) }),
            (
                "file-header key of master `000102…1f`, blob ID 16 × `bb`; layout-2 header key",
                { try FileBlob.headerKey(for: blobID, fileHeaderKey: keys.fileHeader, layout: 2).bytes }
            ),
            (
                "layout-2 header AAD: blob ID 16 × `bb`, chunk size log2 12, vault ID 16 × `aa`, inode ID 5",
                {
                    FileBlob.headerAAD(
                        publicBytes: FileBlob.publicBytes(
                            blobID: blobID, chunkSizeLog2: FormatVectors.chunkSizeLog2, layout: 2),
                        vaultID: vaultID, inodeID: FormatVectors.inodeID, layout: 2)
                }
            ),
            // Thumbnails
            (
                "thumbnail key of master `000102…1f`, blob ID 16 × `bb`; format-2 file key",
                { try Thumbnail.fileKey(thumbnailKey: keys.thumbnail, blobID: blobID).bytes }
            ),
            (
                "format-2 AAD: vault ID 16 × `aa`, inode ID 5, blob ID 16 × `bb`",
                { Thumbnail.aadV2(vaultID: vaultID, inodeID: FormatVectors.inodeID, blobID: blobID) }
            ),
            // vault.header
            ("vector header; slot envelope AAD", { header.slotAAD(header.slots[0]) }),
            ("vector header; recovery envelope AAD", { header.recoveryAAD }),
            (FormatVectors.headerInput, { header.encoded() }),
            // Backup envelope
            ("master = `000102…1f`, N = 1000; backup envelope nonce", { try backupEnvelope().nonce }),
            ("vector header, N = 1000; backup envelope AAD", { header.backupAAD(try backupEnvelope()) }),
            ("that envelope, passphrase `correct horse battery`; sealed master key", { try backupEnvelope().sealed }),
        ]
    }

    /// A chunk's AAD as the blob code hands it to AES-GCM: the first 25 bytes of its tuple.
    static func chunkAAD(blobID: [UInt8], index: Int, final: Bool) -> [UInt8] {
        var aad = FileBlob.chunkAAD(blobID: blobID, index: index, final: final)
        return withUnsafeBytes(of: &aad) { Array($0[0..<25]) }
    }
}

extension SecureBytes {
    /// A copy in an ordinary array: test keys only.
    fileprivate var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}
