import Foundation
import XCTest

/// Backup → change → backup → restore every snapshot on a new device with the passphrase alone, and
/// with the recovery phrase, through each of rclone's local, sftp (a real sshd) and s3 (moto) backends.
final class RoundTripTests: XCTestCase {
    func testLocalRemote() throws {
        let w = try BackupWorld()
        try roundTrip(w, remote: w.root + "/remote")
    }

    func testSFTPRemoteThroughSSHD() throws {
        let w = try BackupWorld()
        let server = try TestServer.sshd(in: w)
        try withExtendedLifetime(server) { try roundTrip(w, remote: server.remote(w.root + "/sftp-remote")) }
    }

    func testS3RemoteThroughMoto() throws {
        let w = try BackupWorld()
        let server = try TestServer.moto(in: w)
        try withExtendedLifetime(server) { try roundTrip(w, remote: server.remote("vaultaire-test/backups")) }
    }

    func roundTrip(_ w: BackupWorld, remote: String) throws {
        let pw = w.passphraseFile
        let first: [String: Data] = [
            "/a.txt": Data("alpha".utf8), "/docs/b.bin": BackupWorld.random(200_000),
            "/docs/c.txt": Data("gamma".utf8), "/empty": Data(),
        ]
        try w.put(first)
        let r1 = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", pw])
        XCTAssertTrue(r1.stdout.hasPrefix("Snapshot 1 "), r1.stdout)

        try w.vaultaire(["rm", w.vault, "/docs/c.txt", "--passphrase-file", pw])
        try w.vaultaire(["rm", w.vault, "/a.txt", "--passphrase-file", pw])
        let changes: [String: Data] = [
            "/a.txt": Data("alpha, second version".utf8), "/docs/d.bin": BackupWorld.random(50_000),
        ]
        try w.put(changes)
        var second = first.merging(changes) { $1 }
        second["/docs/c.txt"] = nil
        let r2 = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", pw])
        XCTAssertTrue(r2.stdout.hasPrefix("Snapshot 2 "), r2.stdout)

        // Unchanged: only the manifest goes up.
        let before = try w.remoteFiles(remote)
        let r3 = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", pw])
        XCTAssertTrue(r3.stdout.contains("uploaded 0 objects, 0 bytes, and a manifest of"), r3.stdout)
        XCTAssertEqual(try w.remoteFiles(remote).subtracting(before), ["snapshots/0000000003"])

        for (id, expected) in [(1, first), (2, second), (3, second)] {
            let device = w.freshDevice()
            let target = w.root + "/restored-\(id)"
            try w.vaultaire(
                ["restore", remote, target, "--snapshot", "\(id)", "--passphrase-file", pw], device: device)
            XCTAssertEqual(try w.tree(of: target, device: device), expected, "snapshot \(id)")
        }

        // The recovery phrase alone, and a new passphrase for the restored vault.
        let device = w.freshDevice()
        let newPassphrase = w.write("new-pw", Data("a brand new passphrase\n".utf8))
        try w.vaultaire(
            [
                "restore", remote, w.root + "/recovered", "--recovery-phrase-file", w.phraseFile,
                "--new-passphrase-file", newPassphrase,
            ], device: device)
        XCTAssertEqual(try w.tree(of: w.root + "/recovered", passphraseFile: newPassphrase, device: device), second)

        let list = try w.vaultaire(["backup", "--list", remote, "--passphrase-file", pw], device: w.freshDevice())
        XCTAssertEqual(
            list.stdout.split(separator: "\n").dropFirst().map { String($0.prefix(10)) },
            ["0000000001", "0000000002", "0000000003"], list.stdout)
        let verify = try w.vaultaire(["backup", "--verify", remote, "--passphrase-file", pw], device: w.freshDevice())
        XCTAssertTrue(verify.stdout.contains("manifest authentic"), verify.stdout)

        // A byte flipped in an object on this remote (through rclone itself) is found.
        let victim = try w.largestObject(remote)
        let local = w.root + "/flipped"
        try w.rclone(["copyto", w.join(remote, victim), local])
        var bytes = try Data(contentsOf: URL(fileURLWithPath: local))
        bytes[bytes.count / 2] ^= 0x04
        try bytes.write(to: URL(fileURLWithPath: local))
        try w.rclone(["copyto", local, w.join(remote, victim)])
        let damaged = try w.vaultaire(
            ["backup", "--verify", remote, "--passphrase-file", pw], device: w.freshDevice(), expect: 24)
        XCTAssertTrue(damaged.stderr.contains("\(victim) ("), damaged.stderr)
    }
}
