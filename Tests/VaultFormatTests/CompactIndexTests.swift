import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFormat
@testable import VaultSystem

/// The packed inode table against a plain dictionary, and the snapshot sealed and read in pieces.
final class CompactIndexTests: XCTestCase {
    var dir = ""
    let vaultID = [UInt8](repeating: 9, count: 16)

    override func setUpWithError() throws {
        dir = NSTemporaryDirectoryPath() + "/compact-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(dir, 0o700), 0)
    }

    override func tearDown() { _ = system("rm -rf '\(dir)'") }

    /// A record with every field set from `seed`, the rare ones on some records only.
    func record(_ id: UInt64, seed: UInt64) -> Inode {
        let kinds: [Inode.Kind] = [.file, .directory, .symlink, .fifo, .characterDevice]
        let kind = kinds[Int(seed % UInt64(kinds.count))]
        var n = Inode(
            id: id, kind: kind, permissions: UInt32(seed & 0o7777), uid: UInt32(seed % 7), gid: 3, now: Int64(seed))
        n.linkCount = UInt32(seed % 5)
        n.size = seed &* 977
        n.modificationTime = -Int64(seed)
        n.changeTime = Int64(seed) << 20
        n.birthTime = 42
        n.contentVersion = seed % 11
        n.contentSeals = seed &* 31
        n.needsCheck = seed % 3 == 0
        if kind == .file {
            n.blobID = (0..<16).map { UInt8(truncatingIfNeeded: seed &+ UInt64($0) &* 37) }
            n.mimeType = ["", "image/jpeg", "text/plain", "application/x-\(seed % 5)"][Int(seed % 4)]
            if seed % 4 == 1 { n.holes = [2..<5, 9..<10] }
        }
        if kind == .symlink { n.symlinkTarget = Array("target-\(seed)".utf8) }
        if kind == .characterDevice { n.deviceNumber = seed }
        if seed % 6 == 0 { n.extendedAttributes = ["user.tag": [UInt8(seed & 0xff)], "user.empty": []] }
        return n
    }

    func testThePackedTableAgreesWithADictionaryThroughPutsReplacementsAndRemovals() {
        var table = InodeTable()
        var model: [UInt64: Inode] = [:]
        var rng = SystemRandomNumberGenerator()
        // Mostly numbers in sequence, as the engine hands them out; a few far beyond the rest.
        for step in 0..<5000 {
            let id: UInt64 =
                step % 97 == 0
                ? UInt64.random(in: 1 << 40...1 << 50, using: &rng) : UInt64.random(in: 1...3000, using: &rng)
            if UInt64.random(in: 0..<4, using: &rng) == 0 {
                table[id] = nil
                model[id] = nil
            } else {
                let n = record(id, seed: UInt64(step))
                table[id] = n
                model[id] = n
            }
            XCTAssertEqual(table.count, model.count, "count after step \(step)")
        }
        for (id, n) in model { XCTAssertEqual(table[id], n, "record \(id)") }
        XCTAssertEqual(Set(table.keys), Set(model.keys))
        XCTAssertEqual(table.values.count { _ in true }, model.count)
        XCTAssertNil(table[0])
        XCTAssertNil(table[UInt64.max - 1])
        let expected = model.filter { $0.value.needsCheck && $0.value.kind == .file }.map(\.key).sorted()
        XCTAssertEqual(table.ids { kind, _, check in check && kind == .file }.sorted(), expected)
        var other = InodeTable()
        for (id, n) in model { other[id] = n }
        XCTAssertEqual(table, other, "equal whatever the order of insertion")
        if let some = model.first(where: { $0.value.kind == .file }) {
            var changed = some.value
            changed.size += 1
            other[some.key] = changed
            XCTAssertNotEqual(table, other)
        }
    }

    func testMoreMIMETypesThanTheTableHoldsAreKeptWhole() {
        var types = MIMETypeTable()
        for i in 1..<MIMETypeTable.capacity { XCTAssertNotNil(types.number(of: "t/\(i)")) }
        XCTAssertNil(types.number(of: "t/overflow"), "the table is full")
        XCTAssertEqual(types.number(of: "t/7"), 7, "known types keep their number")
    }

    /// A snapshot of several pieces (over 1 MiB) reads back equal, and every piece is covered by the
    /// tag: a flipped byte in any of them fails as authentication, never as a parse error or a trap.
    func testASnapshotOfManyPiecesRoundTripsAndAnyFlipFailsAuthentication() throws {
        var state = IndexState.empty(uid: 0, gid: 0, now: 0)
        for i in 0..<12_000 {
            let id = UInt64(2 + i)
            var n = Inode(id: id, kind: .file, permissions: 0o644, uid: 0, gid: 0, now: Int64(i))
            n.blobID = [UInt8](repeating: UInt8(i & 0xff), count: 16)
            n.mimeType = "text/plain"
            try state.apply(.putInode(n))
            try state.apply(.link(parent: Inode.rootID, name: "file-with-a-longish-name-\(i)", child: id))
        }
        state.nextID = 12_002
        XCTAssertGreaterThan(state.encoded().count, 2 << 20, "the snapshot spans several pieces")
        let key = try SecureBytes(randomCount: 32)
        let directory = try DirectoryDescriptor(path: FileSystem.parent(of: dir)).file(
            String(dir.split(separator: "/").last!))
        let store = IndexStore(directory: directory, vaultID: vaultID, key: key)
        try store.create(state)
        let (loaded, _) = try IndexStore(directory: directory, vaultID: vaultID, key: key).load(forWriting: false)
        XCTAssertEqual(loaded, state)

        let path = dir + "/snapshot"
        let original = try XCTUnwrap(FileManagerless.read(path))
        for offset in [40, 1 << 20, (1 << 20) + 7, 2 << 20, original.count - 17, original.count - 1] {
            var bytes = original
            bytes[offset] ^= 0x20
            try FileManagerless.write(bytes, to: path)
            XCTAssertThrowsError(
                try IndexStore(directory: directory, vaultID: vaultID, key: key).load(forWriting: false)
            ) {
                XCTAssertEqual($0 as? FormatError, .damaged("index snapshot fails authentication"), "flip at \(offset)")
            }
        }
        try FileManagerless.write(Array(original.prefix(original.count - 1000)), to: path)
        XCTAssertThrowsError(try IndexStore(directory: directory, vaultID: vaultID, key: key).load(forWriting: false)) {
            XCTAssertEqual($0 as? FormatError, .damaged("index snapshot fails authentication"), "cut short")
        }
    }

    /// A snapshot decoded ahead is used only if the file is still the one it came from.
    func testAPreloadedSnapshotReplacedMeanwhileIsReadAgain() throws {
        let key = try SecureBytes(randomCount: 32)
        let directory = try DirectoryDescriptor(path: FileSystem.parent(of: dir)).file(
            String(dir.split(separator: "/").last!))
        var state = IndexState.empty(uid: 0, gid: 0, now: 0)
        try IndexStore(directory: directory, vaultID: vaultID, key: key).create(state)
        let reader = IndexStore(directory: directory, vaultID: vaultID, key: key)
        reader.preloadSnapshot()
        let writer = IndexStore(directory: directory, vaultID: vaultID, key: key)
        _ = try writer.load(forWriting: true)
        let n = Inode(id: 2, kind: .file, permissions: 0o600, uid: 0, gid: 0, now: 5)
        let changes: [IndexChange] = [.putInode(n), .link(parent: Inode.rootID, name: "new", child: 2)]
        try writer.append(changes)
        for c in changes { try state.apply(c) }
        try writer.compact(state)
        let (loaded, report) = try reader.load(forWriting: false)
        XCTAssertEqual(loaded, state, "the replaced snapshot's contents, not the preloaded ones")
        XCTAssertEqual(report.records, 0)

        let again = IndexStore(directory: directory, vaultID: vaultID, key: key)
        again.preloadSnapshot()
        XCTAssertEqual(try again.load(forWriting: false).0, state, "an unchanged file's preload is used")
    }

    /// Values cut anywhere by the pieces' edges decode as from one buffer.
    func testPiecesOfAnySizeDecodeAsOneBuffer() throws {
        var state = IndexState.empty(uid: 0, gid: 0, now: 0)
        for i in 0..<40 {
            let n = record(UInt64(2 + i), seed: UInt64(i))
            try state.apply(.putInode(n))
            try state.apply(.link(parent: Inode.rootID, name: "n\(i)", child: n.id))
        }
        let whole = state.encoded(version: 2, indexSeals: 5)
        for size in [1, 2, 3, 7, 64, 1000] {
            var position = 0
            var seals: UInt64 = 0
            let decoded = try IndexState(
                decodingPieces: {
                    guard position < whole.count else { return nil }
                    defer { position += size }
                    return Array(whole[position..<Swift.min(whole.count, position + size)])
                }, version: 2, indexSeals: &seals)
            XCTAssertEqual(decoded, state, "pieces of \(size) bytes")
            XCTAssertEqual(seals, 5)
        }
        var pieces: [[UInt8]] = []
        state.encode(version: 2, indexSeals: 5, pieceSize: 100) { pieces.append($0) }
        XCTAssertGreaterThan(pieces.count, 3)
        XCTAssertEqual(Array(pieces.joined()), whole, "written in pieces, the same bytes")
        var extra = [whole, [0]].makeIterator()
        var seals: UInt64 = 0
        XCTAssertThrowsError(try IndexState(decodingPieces: { extra.next() }, version: 2, indexSeals: &seals))
    }

    func testAStreamSealsAndOpensAsOneCallDoes() throws {
        let key = try SecureBytes(randomCount: 32)
        let nonce = try SecureRandom.bytes(12)
        let aad = Array("head".utf8)
        let plain = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let oneCall = try AESGCM.seal(plain, using: key, nonce: nonce, authenticating: aad)
        let sealer = try AESGCMStream(sealing: true, key: key, nonce: nonce, authenticating: aad)
        var sealed: [UInt8] = []
        for start in stride(from: 0, to: plain.count, by: 33_333) {
            var piece = Array(plain[start..<Swift.min(plain.count, start + 33_333)])
            try piece.withUnsafeMutableBytes { try sealer.update(UnsafeRawBufferPointer($0), into: $0) }
            sealed += piece
        }
        sealed += try sealer.finishSealing()
        XCTAssertEqual(sealed, oneCall)

        func open(_ box: [UInt8]) throws -> [UInt8] {
            let opener = try AESGCMStream(sealing: false, key: key, nonce: nonce, authenticating: aad)
            var out = Array(box.dropLast(16))
            try out.withUnsafeMutableBytes { try opener.update(UnsafeRawBufferPointer($0), into: $0) }
            try opener.finishOpening(tag: Array(box.suffix(16)))
            return out
        }
        XCTAssertEqual(try open(sealed), plain)
        var flipped = sealed
        flipped[50_000] ^= 1
        XCTAssertThrowsError(try open(flipped)) { XCTAssertEqual($0 as? CryptoError, .authenticationFailure) }
        flipped = sealed
        flipped[sealed.count - 1] ^= 1
        XCTAssertThrowsError(try open(flipped)) { XCTAssertEqual($0 as? CryptoError, .authenticationFailure) }
    }
}

/// Whole-file reads and writes for the tests, without Foundation.
enum FileManagerless {
    static func read(_ path: String) throws -> [UInt8]? {
        try FileDescriptor(path: path, flags: O_RDONLY).readAll()
    }

    static func write(_ bytes: [UInt8], to path: String) throws {
        let fd = try FileDescriptor(path: path, flags: O_WRONLY | O_TRUNC)
        try fd.write(bytes, at: 0)
    }
}
