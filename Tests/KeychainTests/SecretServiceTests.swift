import Foundation
import TestSupport
import XCTest

@testable import VaultCrypto
@testable import VaultKeychain
@testable import VaultSystem

/// Counts the calls that reach the real backend, to show size checks happen before it.
final class CountingBackend: KeychainBackend {
    let inner: KeychainBackend
    var calls = 0
    var name: String { inner.name }
    init(_ inner: KeychainBackend) { self.inner = inner }
    func store(_ item: KeychainItem, value: SecureBytes) throws {
        calls += 1
        try inner.store(item, value: value)
    }
    func get(_ item: KeychainItem) throws -> SecureBytes {
        calls += 1
        return try inner.get(item)
    }
    func delete(_ item: KeychainItem) throws {
        calls += 1
        try inner.delete(item)
    }
    func createIfAbsent(_ item: KeychainItem, value: SecureBytes) throws -> SecureBytes {
        calls += 1
        return try inner.createIfAbsent(item, value: value)
    }
}

/// The K_master contract of seed 003 against a real gnome-keyring-daemon in a private D-Bus session
/// (scripts/test.sh starts both and writes the keyring password to VAULTAIRE_TEST_KEYRING_PASSWORD_FILE).
final class SecretServiceTests: XCTestCase {
    var passwordFile = ""
    var runner: ProcessRunner!

    override func setUpWithError() throws {
        guard let file = ProcessInfo.processInfo.environment["VAULTAIRE_TEST_KEYRING_PASSWORD_FILE"],
            ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil
        else {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("no test keyring: run the tests through scripts/test.sh")
            }
            throw XCTSkip("!!! no test keyring (run scripts/test.sh): Secret Service tests SKIPPED !!!")
        }
        passwordFile = file
        runner = ProcessRunner(environment: ProcessInfo.processInfo.environment, scratch: "/tmp")
        try unlockKeyring()
    }

    func lockKeyring() throws {
        let r = try runner.run(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets",
                "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock",
                "['/org/freedesktop/secrets/collection/login']",
            ])
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    /// Unlocks by restarting the daemon with the password on standard input, as a login would.
    func unlockKeyring() throws {
        let password = try String(contentsOfFile: passwordFile, encoding: .utf8)
        let r = try runner.run(
            "/usr/bin/gnome-keyring-daemon", ["--replace", "--unlock", "--components=secrets", "--daemonize"],
            input: password)
        XCTAssertEqual(r.status, 0, r.stderr)
        usleep(300_000)
    }

    func testEveryTransitionOfTheMasterKeyLifecycle() throws {
        let keychain = Keychain(backend: SecretServiceKeychain(mayPrompt: false))
        let vault = try SecureRandom.bytes(16)
        let first = try SecureBytes(randomCount: 32)
        let second = try SecureBytes(randomCount: 32)
        // ABSENT → ABSENT: deleting an absent key is no error; reading it is notFound.
        try keychain.deleteMasterKey(for: vault)
        XCTAssertFalse(try keychain.hasMasterKey(for: vault))
        XCTAssertThrowsError(try keychain.getMasterKey(for: vault)) { XCTAssertEqual($0 as? KeychainError, .notFound) }
        // ABSENT → STORED
        try keychain.storeMasterKey(first, for: vault)
        XCTAssertTrue(try keychain.hasMasterKey(for: vault))
        XCTAssertEqual(try keychain.getMasterKey(for: vault), first)
        // STORED → STORED: idempotent overwrite
        try keychain.storeMasterKey(second, for: vault)
        try keychain.storeMasterKey(second, for: vault)
        XCTAssertEqual(try keychain.getMasterKey(for: vault), second)
        // STORED → INACCESSIBLE: the keyring is locked
        try lockKeyring()
        XCTAssertThrowsError(try keychain.getMasterKey(for: vault)) {
            guard case KeychainError.deviceLocked = $0 else { return XCTFail("expected deviceLocked, got \($0)") }
        }
        XCTAssertThrowsError(try keychain.storeMasterKey(first, for: vault)) {
            guard case KeychainError.deviceLocked = $0 else { return XCTFail("expected deviceLocked, got \($0)") }
        }
        // INACCESSIBLE → STORED: unlocked again, the same key is there (the failed store wrote nothing).
        try unlockKeyring()
        XCTAssertEqual(try keychain.getMasterKey(for: vault), second)
        // STORED → ABSENT
        try keychain.deleteMasterKey(for: vault)
        XCTAssertFalse(try keychain.hasMasterKey(for: vault))
        try keychain.deleteMasterKey(for: vault)
    }

    func testWrongSizesAreRefusedBeforeTheBackend() throws {
        let counting = CountingBackend(SecretServiceKeychain(mayPrompt: false))
        let keychain = Keychain(backend: counting)
        for size in [0, 31, 33] {
            XCTAssertThrowsError(try keychain.storeMasterKey(SecureBytes(count: size), for: [1, 2, 3])) {
                XCTAssertEqual($0 as? KeychainError, .invalidKeySize(size))
            }
        }
        XCTAssertEqual(counting.calls, 0)
    }

    func testLockedKeyringFailsTheCommandWithNothingWrittenElsewhere() throws {
        let root = "/tmp/vaultaire-ss-\(getpid())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var env = ProcessInfo.processInfo.environment
        env["VAULTAIRE_KEYCHAIN"] = nil
        env["VAULTAIRE_ALLOW_WEAK_KDF"] = "1"
        env["XDG_DATA_HOME"] = root + "/data"  // where a file keychain would go: it must stay empty
        let cli = ProcessRunner(environment: env, scratch: root)
        _ = FileManager.default.createFile(atPath: root + "/pw", contents: Data("secret service passphrase\n".utf8))
        let bin = ProcessRunner.vaultaireBinary
        var r = try cli.run(
            bin,
            [
                "init", root + "/vault", "--passphrase-file", root + "/pw", "--kdf-iterations", "1000",
                "--recovery-iterations", "1000", "--recovery-phrase-out", root + "/phrase", "--remember",
            ])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try cli.run(bin, ["ls", root + "/vault"])
        XCTAssertEqual(r.status, 0, "remembered key unlocks: \(r.stderr)")
        try lockKeyring()
        r = try cli.run(bin, ["ls", root + "/vault", "--passphrase-file", root + "/pw"])
        XCTAssertEqual(r.status, 15)
        XCTAssertTrue(r.stderr.contains("locked"), r.stderr)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: root + "/data/vaultaire"), "no fallback to the file keychain")
        try unlockKeyring()
        r = try cli.run(bin, ["forget", root + "/vault"])
        XCTAssertEqual(r.status, 0)
        r = try cli.run(bin, ["ls", root + "/vault", "--passphrase-file", root + "/pw"])
        XCTAssertEqual(r.status, 0, r.stderr)

        // No secret in any output: the passphrase, and the master key in hex and base64.
        let keychain = Keychain(backend: SecretServiceKeychain(mayPrompt: false))
        let header = try Data(contentsOf: URL(fileURLWithPath: root + "/vault/vault.header"))
        let vaultID = Array(header[6..<22])
        r = try cli.run(
            bin,
            [
                "passwd", root + "/vault", "--passphrase-file", root + "/pw", "--new-passphrase-file", root + "/pw",
                "--remember",
            ])
        XCTAssertEqual(r.status, 0, r.stderr)
        let key = try keychain.getMasterKey(for: vaultID)
        let bytes = key.withUnsafeBytes { Array($0) }
        let forms = [
            bytes.map { String(format: "%02x", $0) }.joined(), Data(bytes).base64EncodedString(),
            "secret service passphrase",
        ]
        let everything = cli.outputs.joined(separator: "\n")
        for form in forms { XCTAssertFalse(everything.contains(form), "a secret reached the output") }
        try keychain.deleteMasterKey(for: vaultID)
    }

    /// Many `vaultaire init` at once with no device salt in the Secret Service (issue 22, finding 3):
    /// the read-or-create runs under a lock, so all of them use the first one's salt and every vault opens.
    func testConcurrentInitsOnAnEmptySecretServiceAllOpen() throws {
        let root = "/tmp/vaultaire-ss-race-\(getpid())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var env = ProcessInfo.processInfo.environment
        env["VAULTAIRE_KEYCHAIN"] = nil
        env["VAULTAIRE_ALLOW_WEAK_KDF"] = "1"
        let cli = ProcessRunner(environment: env, scratch: root)
        _ = FileManager.default.createFile(atPath: root + "/pw", contents: Data("secret service passphrase\n".utf8))
        let bin = ProcessRunner.vaultaireBinary
        let keychain = Keychain(backend: SecretServiceKeychain(mayPrompt: false))
        for round in 0..<2 {
            try keychain.delete(.deviceSalt)  // an empty keychain (the vaults of earlier tests are gone)
            let pids = try (0..<6).map { i in
                try cli.spawn(
                    bin,
                    [
                        "init", root + "/v\(round)-\(i)", "--passphrase-file", root + "/pw", "--kdf-iterations", "1000",
                        "--recovery-iterations", "1000", "--recovery-phrase-out", root + "/p\(round)-\(i)",
                    ],
                    stderr: root + "/err\(round)-\(i)")
            }
            for (i, pid) in pids.enumerated() {
                XCTAssertEqual(
                    ProcessRunner.wait(pid), 0,
                    (try? String(contentsOfFile: root + "/err\(round)-\(i)", encoding: .utf8)) ?? "")
            }
            for i in 0..<pids.count {
                let r = try cli.run(bin, ["ls", root + "/v\(round)-\(i)", "--passphrase-file", root + "/pw"])
                XCTAssertEqual(r.status, 0, "round \(round), vault \(i): \(r.stderr)")
            }
        }
    }
}
