import Foundation
import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import XCTest

@testable import VaultThumbnails

/// Which released files the thumbnailer's thread looks at: it opens and decrypts each one it looks
/// at, so files that cannot be images and cannot have thumbnails must not reach it.
final class ThumbnailerQueueTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        root = "/tmp/vaultaire-thumbq-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: root)
        super.tearDown()
    }

    /// A vault with 4 KiB chunks and small KDF counts.
    private func makeVault() throws -> UnlockedVault {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        setenv("XDG_CACHE_HOME", root + "/cache", 1)
        let keychain = Keychain(backend: FileKeychain(directory: root + "/keychain"))
        var options = VaultAccess.CreateOptions()
        options.iterations = 1000
        options.recoveryIterations = 1000
        options.chunkSizeLog2 = 12
        let credential = Credential.passphrase(SecureBytes(copying: Array("a test passphrase".utf8)))
        let (_, master) = try VaultAccess.create(
            at: root + "/vault", credential: credential, pattern: nil, keychain: keychain, options: options,
            wordlist: try Wordlist.load())
        return try VaultAccess.open(at: root + "/vault", master: master, keychain: keychain, readOnly: false)
    }

    private func write(_ bytes: [UInt8], to handle: VaultFS.FileHandle, in vault: UnlockedVault) throws {
        _ = try bytes.withUnsafeBytes { try vault.write(handle, at: 0, from: $0) }
        vault.release(handle)
    }

    private func create(_ name: String, _ bytes: [UInt8], in vault: UnlockedVault) throws -> UInt64 {
        let handle = try vault.create(in: Inode.rootID, name: name, permissions: 0o644, caller: .current)
        try write(bytes, to: handle, in: vault)
        return handle.id
    }

    func testNewFilesThatAreNoImagesAreNotLookedAtAndEveryOtherWrittenFileIs() throws {
        XCTAssertLessThanOrEqual(ImageKind.prefixLength, ContentChange.leadingByteLimit)
        let vault = try makeVault()
        let thumbnailer = Thumbnailer(vault: vault, report: { _ in })
        thumbnailer.attach()
        for i in 0..<50 { _ = try create("note\(i).txt", Array("a short note, number \(i)\n".utf8), in: vault) }
        _ = try create("empty", [], in: vault)
        thumbnailer.drain()
        XCTAssertEqual(thumbnailer.lookedAtCount, 0, "new small files that are no images")
        // Starts like a JPEG: looked at (and skipped, as it is none).
        _ = try create("fake.jpg", [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0x5A, count: 5000), in: vault)
        thumbnailer.drain()
        XCTAssertEqual(thumbnailer.lookedAtCount, 1, "a new file that starts like an image")
        // Larger than a chunk, written in one go: its first bytes are no longer cached at release.
        _ = try create("large.bin", [UInt8](repeating: 0x41, count: 3 * 4096 + 100), in: vault)
        thumbnailer.drain()
        XCTAssertEqual(thumbnailer.lookedAtCount, 2, "a new file whose first bytes are not at hand")
        // Written again after a close: it may have had thumbnails, which would now be stale.
        let note = try vault.resolve("/note0.txt")
        try write(Array("overwritten".utf8), to: try vault.open(note.id, write: true), in: vault)
        thumbnailer.drain()
        XCTAssertEqual(thumbnailer.lookedAtCount, 3, "a file written again")
        thumbnailer.stop()
        try vault.close()
    }
}
