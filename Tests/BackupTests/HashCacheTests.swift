import Foundation
import Glibc
import VaultBackup
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import XCTest

/// The backup's cache of vault file hashes: an unchanged vault is not read again, a file changed
/// behind its times' back is, and a cache that does not authenticate is ignored.
final class HashCacheTests: XCTestCase {
    /// A vault of a few files whose times are older than the cache's settle time, backed up once.
    func backedUpWorld() throws -> (BackupWorld, String) {
        let w = try BackupWorld()
        try w.put(["/a.bin": BackupWorld.random(70_000), "/b.bin": BackupWorld.random(3_000), "/c.txt": Data("c".utf8)])
        // Files changed within two seconds of a backup are hashed again by the next one.
        usleep(2_200_000)
        let remote = w.root + "/remote"
        let first = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let all = try XCTUnwrap(
            BackupWorld.number(after: " of ", in: first.stdout.components(separatedBy: "read ").last!))
        XCTAssertEqual(BackupWorld.number(after: "read ", in: first.stdout), all, first.stdout)
        return (w, remote)
    }

    func masterKey(_ w: BackupWorld) throws -> SecureBytes {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        let keychain = Keychain(backend: FileKeychain(directory: w.root + "/device-0/vaultaire/keychain"))
        let credential = Credential.passphrase(SecureBytes(copying: Array("backup test passphrase".utf8)))
        return try VaultAccess.unwrapMasterKey(at: w.vault, credential: credential, keychain: keychain)
    }

    /// The vault's largest blob, by its path inside the vault directory.
    func largestBlob(_ w: BackupWorld) throws -> String {
        let fm = FileManager.default
        let blobs = try fm.subpathsOfDirectory(atPath: w.vault + "/blobs").filter { $0.count == 33 }
        let sized = try blobs.map { ($0, try fm.attributesOfItem(atPath: w.vault + "/blobs/" + $0)[.size] as! Int) }
        return "blobs/" + sized.max { $0.1 < $1.1 }!.0
    }

    func testAnUnchangedVaultIsNotReadAgain() throws {
        let (w, remote) = try backedUpWorld()
        let again = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        XCTAssertEqual(BackupWorld.number(after: "read ", in: again.stdout), 0, again.stdout)
        XCTAssertTrue(again.stdout.contains("uploaded 0 objects"), again.stdout)
        try w.vaultaire(["backup", "--verify", remote, "--passphrase-file", w.passphraseFile])
    }

    func testABlobChangedInPlaceWithItsTimesPutBackIsReadAgain() throws {
        let (w, remote) = try backedUpWorld()
        let blob = try largestBlob(w)
        let path = w.vault + "/" + blob
        var before = stat()
        XCTAssertEqual(stat(path, &before), 0)
        // What `rsync --inplace -t` does: new bytes at the same size, the old modification time put back.
        let fd = open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var byte: UInt8 = 0x5a
        XCTAssertEqual(pwrite(fd, &byte, 1, 200), 1)
        close(fd)
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        var after = stat()
        XCTAssertEqual(stat(path, &after), 0)
        XCTAssertEqual(after.st_size, before.st_size)
        XCTAssertEqual(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec)

        let second = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        XCTAssertEqual(BackupWorld.number(after: "read ", in: second.stdout), 1, second.stdout)
        let manifest = try Manifest(
            opening: Array(try Data(contentsOf: URL(fileURLWithPath: remote + "/snapshots/0000000002"))),
            master: try masterKey(w))
        let entry = try XCTUnwrap(manifest.entries.first { $0.path == blob })
        let now = try SHA256Stream.digest(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        XCTAssertEqual(entry.hash, now, "snapshot 2 holds the blob as it is now")
    }

    func testACacheItDidNotWriteIsIgnored() throws {
        let (w, remote) = try backedUpWorld()
        let directory = w.root + "/.cache/vaultaire/backup-hashes"
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        XCTAssertEqual(names.count, 1, "one cache file per vault: \(names)")
        let file = directory + "/" + names[0]
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        // A byte of the last entry's hash (just before the 32-byte MAC): a cache that would name an
        // object whose content does not match it.
        bytes[bytes.count - 33] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: file))

        let second = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let all = try XCTUnwrap(
            BackupWorld.number(after: " of ", in: second.stdout.components(separatedBy: "read ").last!))
        XCTAssertEqual(BackupWorld.number(after: "read ", in: second.stdout), all, "every file read: \(second.stdout)")
        XCTAssertTrue(second.stdout.contains("uploaded 0 objects"), second.stdout)
        try w.vaultaire(["backup", "--verify", remote, "--passphrase-file", w.passphraseFile])
    }
}
