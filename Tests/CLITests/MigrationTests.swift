import Foundation
import XCTest

/// Version-1 vaults migrate to version 2 in place (issue 23, point 4): with `vaultaire upgrade` or the
/// first writable open; the checked-in version-1 fixture keeps every file; every state a crash can
/// leave on the way opens.
final class MigrationTests: XCTestCase {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("VaultFSTests/Fixtures").path
    let passphrase = "fixture passphrase v1\n"

    /// A copy of the version-1 fixture at `name`, and this world's keychain holding its device salt.
    func fixtureCopy(_ w: CLIWorld, _ name: String) throws -> String {
        let path = w.root + "/" + name
        try copyTree(MigrationTests.fixtures + "/vault-v1", path)
        let keychain = w.root + "/data/vaultaire/keychain"
        if !FileManager.default.fileExists(atPath: keychain + "/device-salt") {
            try FileManager.default.createDirectory(
                atPath: keychain, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: w.root + "/data/vaultaire")
            let salt = try Data(contentsOf: URL(fileURLWithPath: MigrationTests.fixtures + "/vault-v1.device-salt"))
            XCTAssertTrue(
                FileManager.default.createFile(
                    atPath: keychain + "/device-salt", contents: salt, attributes: [.posixPermissions: 0o600]))
        }
        return path
    }

    func copyTree(_ from: String, _ to: String) throws {
        try? FileManager.default.removeItem(atPath: to)
        let cp = Process()
        cp.executableURL = URL(fileURLWithPath: "/bin/cp")
        cp.arguments = ["-a", from, to]
        try cp.run()
        cp.waitUntilExit()
        XCTAssertEqual(cp.terminationStatus, 0, "cp -a \(from) \(to)")
    }

    /// Every blob file of the vault (non-empty ones: the fixture's empty file has an empty blob).
    func blobFiles(_ vault: String) throws -> [String] {
        var out: [String] = []
        for sub in try FileManager.default.contentsOfDirectory(atPath: vault + "/blobs") {
            for name in try FileManager.default.contentsOfDirectory(atPath: vault + "/blobs/" + sub) {
                let path = vault + "/blobs/" + sub + "/" + name
                if try bytes(path).count > 0 { out.append(path) }
            }
        }
        return out
    }

    func bytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

    /// Every file of the fixture, read back and compared with what version 1 wrote.
    func assertFixtureFiles(
        _ w: CLIWorld, _ vault: String, _ pw: String, file: StaticString = #filePath, line: UInt = #line
    )
        throws
    {
        let hello = try w.run(["get", vault, "/docs/hello.txt", "-", "--passphrase-file", pw], file: file, line: line)
        XCTAssertEqual(hello.stdout, "Hello from format version 1.\n", file: file, line: line)
        let v = try w.run(
            ["get", vault, "/forty-thousand-v.txt", "-", "--passphrase-file", pw], file: file, line: line)
        XCTAssertEqual(v.stdout, String(repeating: "v", count: 40000), file: file, line: line)
        let verify = try w.run(["verify", vault, "--passphrase-file", pw], file: file, line: line)
        XCTAssertTrue(verify.stdout.contains("all intact"), verify.stdout, file: file, line: line)
    }

    func testTheVersion1FixtureMigratesWithUpgrade() throws {
        let w = try CLIWorld()
        let vault = try fixtureCopy(w, "v1")
        let pw = w.file("pw", passphrase)
        let before = try bytes(vault + "/vault.header")
        XCTAssertEqual(before.count, 259)
        XCTAssertTrue(try w.run(["info", vault]).stdout.contains("Format version:      1"))
        // Reading leaves a version-1 vault as it is.
        try assertFixtureFiles(w, vault, pw)
        XCTAssertEqual(try bytes(vault + "/vault.header"), before)
        let upgraded = try w.run(["upgrade", vault, "--passphrase-file", pw])
        XCTAssertTrue(upgraded.stdout.contains("from format version 1 to 2"), upgraded.stdout)
        let after = try bytes(vault + "/vault.header")
        XCTAssertEqual(after[4], 2)
        XCTAssertTrue(try w.run(["info", vault]).stdout.contains("Format version:      2"))
        let list = try w.run(["device", "list", vault])
        XCTAssertEqual(list.stdout.split(separator: "\n").count, 2, list.stdout)
        XCTAssertTrue(list.stdout.contains("\n* "), list.stdout)  // the slot is this machine's
        try assertFixtureFiles(w, vault, pw)
        let phrase = MigrationTests.fixtures + "/vault-v1.recovery-phrase"
        let checked = try w.run(["verify", vault, "--recovery-phrase-file", phrase])
        XCTAssertTrue(checked.stdout.contains("and the recovery phrase: all intact"), checked.stdout)
        let again = try w.run(["upgrade", vault, "--passphrase-file", pw])
        XCTAssertTrue(again.stdout.contains("is at format version 2"), again.stdout)
        // --compact rewrites the fixture's version-1 blobs (layout byte 1 at offset 4) into layout 2.
        let blobs = try blobFiles(vault)
        XCTAssertFalse(blobs.isEmpty)
        XCTAssertTrue(try blobs.allSatisfy { try bytes($0)[4] == 1 })
        let compact = try w.run(["upgrade", vault, "--compact", "--passphrase-file", pw])
        XCTAssertTrue(compact.stdout.contains("Rewrote \(blobs.count) file(s)"), compact.stdout)
        let after2 = try blobFiles(vault)
        XCTAssertEqual(after2.count, blobs.count)
        XCTAssertTrue(try after2.allSatisfy { try bytes($0)[4] == 2 })
        try assertFixtureFiles(w, vault, pw)
    }

    func testTheFirstWritableOpenMigrates() throws {
        let w = try CLIWorld()
        let vault = try fixtureCopy(w, "v1")
        let pw = w.file("pw", passphrase)
        let put = try w.run(["put", vault, pw, "/added-after-migration.txt", "--passphrase-file", pw])
        XCTAssertTrue(put.stderr.contains("upgraded the vault to format version 2"), put.stderr)
        XCTAssertEqual(try bytes(vault + "/vault.header")[4], 2)
        try assertFixtureFiles(w, vault, pw)
        let added = try w.run(["get", vault, "/added-after-migration.txt", "-", "--passphrase-file", pw])
        XCTAssertEqual(added.stdout, passphrase)
    }

    /// The migration writes the header (temporary, rename), then compacts the index (snapshot
    /// temporary, rename, new journal). Each state a crash can leave between those steps is built from
    /// the files of a vault before and after, and must open with every file intact, then migrate.
    func testEveryStateACrashDuringMigrationLeavesOpens() throws {
        let w = try CLIWorld()
        let pw = w.file("pw", passphrase)
        let old = try fixtureCopy(w, "old")
        let new = try fixtureCopy(w, "new")
        try w.run(["upgrade", new, "--passphrase-file", pw])
        // The order the migration writes in: the index as it is loaded for writing, then the header.
        let states: [(String, [(from: String, to: String)])] = [
            ("the old header, the new snapshot as a temporary", [(new + "/index/snapshot", "index/snapshot.tmp")]),
            ("the old header, the new snapshot beside the old journal", [(new + "/index/snapshot", "index/snapshot")]),
            (
                "the old header, the new snapshot, the new journal as a temporary",
                [(new + "/index/snapshot", "index/snapshot"), (new + "/index/journal", "index/journal.tmp")]
            ),
            (
                "the old header beside the new index",
                [(new + "/index/snapshot", "index/snapshot"), (new + "/index/journal", "index/journal")]
            ),
            (
                "the new index, the new header as a temporary",
                [
                    (new + "/index/snapshot", "index/snapshot"), (new + "/index/journal", "index/journal"),
                    (new + "/vault.header", "vault.header.tmp"),
                ]
            ),
            // States of an earlier build of this version, which wrote the header first.
            ("the new header written as a temporary", [(new + "/vault.header", "vault.header.tmp")]),
            ("the new header in place, the index not yet compacted", [(new + "/vault.header", "vault.header")]),
            (
                "the new snapshot written as a temporary",
                [(new + "/vault.header", "vault.header"), (new + "/index/snapshot", "index/snapshot.tmp")]
            ),
            (
                "the new snapshot in place beside the old journal",
                [(new + "/vault.header", "vault.header"), (new + "/index/snapshot", "index/snapshot")]
            ),
        ]
        for (i, (state, files)) in states.enumerated() {
            let vault = w.root + "/state-\(i)"
            try copyTree(old, vault)
            for (from, to) in files {
                try Data(try bytes(from)).write(to: URL(fileURLWithPath: vault + "/" + to))
            }
            let ls = try w.run(["ls", vault, "/", "--passphrase-file", pw])
            XCTAssertTrue(ls.stdout.contains("forty-thousand-v.txt"), "\(state): \(ls.stdout)")
            try assertFixtureFiles(w, vault, pw)
            try w.run(["upgrade", vault, "--passphrase-file", pw])
            XCTAssertEqual(try bytes(vault + "/vault.header")[4], 2, state)
            XCTAssertFalse(FileManager.default.fileExists(atPath: vault + "/vault.header.tmp"), state)
            XCTAssertFalse(FileManager.default.fileExists(atPath: vault + "/index/snapshot.tmp"), state)
            XCTAssertFalse(FileManager.default.fileExists(atPath: vault + "/index/journal.tmp"), state)
            try assertFixtureFiles(w, vault, pw)
        }
    }

    /// A real `kill -9` after every step of the migration, in turn: each command is first run whole
    /// under a preload that counts the calls changing what is on disk (writes, truncations, syncs,
    /// renames, links, unlinks — Tests/FaultInjection/kill_at_call.c), then once per call with the
    /// process killed just before it. Each time the command must have died by the kill, and the vault
    /// it left must open read-only with every file intact, then migrate and open again. Each round has
    /// a keychain of its own (a killed round's generation record would make the next copy a rollback).
    func testKill9AfterEveryStepOfTheMigrationLeavesAVaultThatOpens() throws {
        let shim = try FaultInjection.buildKillShim(into: try CLIWorld().root + "-shim")
        defer { try? FileManager.default.removeItem(atPath: (shim as NSString).deletingLastPathComponent) }
        let commands: [(name: String, args: (String) -> [String])] = [
            ("upgrade", { ["upgrade", $0] }),
            ("the first writable open", { ["mkdir", $0, "/made-while-migrating"] }),
            ("upgrade --compact", { ["upgrade", $0, "--compact"] }),
        ]
        for command in commands {
            let counted = try CLIWorld()
            let countFile = counted.root + "/calls"
            let whole = try counted.run(
                command.args(try fixtureCopy(counted, "whole")) + [
                    "--passphrase-file", counted.file("pw", passphrase),
                ],
                environment: ["LD_PRELOAD": shim, "KILL_AT_COUNT_FILE": countFile])
            XCTAssertTrue(whole.stderr.contains("format version 2") || whole.stdout.contains("format version 2"))
            let calls =
                Int(
                    try String(contentsOfFile: countFile, encoding: .utf8).trimmingCharacters(
                        in: .whitespacesAndNewlines)) ?? 0
            XCTAssertGreaterThan(calls, 5, "\(command.name) made \(calls) counted calls")
            for step in 1...max(calls, 1) {
                let w = try CLIWorld()
                let pw = w.file("pw", passphrase)
                let vault = try fixtureCopy(w, "v")
                let killed = try w.run(
                    command.args(vault) + ["--passphrase-file", pw],
                    environment: ["LD_PRELOAD": shim, "KILL_AT_CALL": String(step)], expect: nil)
                XCTAssertEqual(killed.status, SIGKILL, "\(command.name), killed before call \(step) of \(calls)")
                let ls = try w.run(["ls", vault, "/", "--passphrase-file", pw], expect: nil)
                XCTAssertEqual(ls.status, 0, "\(command.name), after call \(step - 1) of \(calls): \(ls.stderr)")
                try assertFixtureFiles(w, vault, pw)
                try w.run(["upgrade", vault, "--passphrase-file", pw])
                XCTAssertEqual(try bytes(vault + "/vault.header")[4], 2, "\(command.name), step \(step)")
                try assertFixtureFiles(w, vault, pw)
            }
        }
    }
}
