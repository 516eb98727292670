import Foundation
import TestSupport
import XCTest

/// Runs the built `vaultaire` binary as a user would, in a private temporary world: its own
/// XDG_DATA_HOME (file keychain), small KDF counts allowed.
final class CLIWorld {
    let root: String
    let binary: String
    var environment: [String: String]

    init() throws {
        root = "/tmp/vaultaire-cli-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        binary = ProcessRunner.vaultaireBinary
        environment = [
            "PATH": "/usr/bin:/bin", "HOME": root, "XDG_DATA_HOME": root + "/data",
            "VAULTAIRE_ALLOW_WEAK_KDF": "1", "VAULTAIRE_KEYCHAIN": "file",
        ]
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
        /// The lines of stderr other than the weak-KDF warning every command prints for the test
        /// vaults (made with small counts), which `weakKDFWarnings` counts.
        var errorLines: [Substring] { stderr.split(separator: "\n").filter { !$0.hasPrefix(weakKDFWarningPrefix) } }
        var weakKDFWarnings: Int { stderr.split(separator: "\n").filter { $0.hasPrefix(weakKDFWarningPrefix) }.count }
    }

    func file(_ name: String, _ contents: String) -> String {
        let path = root + "/" + name
        FileManager.default.createFile(
            atPath: path, contents: Data(contents.utf8), attributes: [.posixPermissions: 0o600])
        return path
    }

    /// A vault at `root/vault` with small KDF counts, its passphrase file and its recovery phrase file.
    func makeVault(remember: Bool = false) throws -> (vault: String, pw: String, phraseFile: String) {
        let pw = file("pw", "correct horse battery\n")
        let vault = root + "/vault"
        let phraseFile = root + "/phrase.txt"
        try run(
            [
                "init", vault, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
                "--recovery-phrase-out", phraseFile,
            ] + (remember ? ["--remember"] : []))
        return (vault, pw, phraseFile)
    }

    /// Starts the command; the caller waits (or kills).
    func start(_ args: [String], environment extra: [String: String] = [:]) throws -> (Process, Pipe, Pipe) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = args
        p.environment = environment.merging(extra) { $1 }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return (p, out, err)
    }

    @discardableResult
    func run(
        _ args: [String], environment extra: [String: String] = [:], expect status: Int32? = 0,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> Result {
        let (p, out, err) = try start(args, environment: extra)
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let r = Result(
            status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
            stderr: String(decoding: e, as: UTF8.self))
        if let status {
            XCTAssertEqual(
                r.status, status, "vaultaire \(args.joined(separator: " ")): \(r.stderr)", file: file, line: line)
        }
        outputs.append(r.stdout + r.stderr)
        return r
    }

    /// Everything every command printed, for leak checks.
    var outputs: [String] = []
}

/// The call-counting preload of Tests/FaultInjection, built for the crash tests.
enum FaultInjection {
    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FaultInjection/kill_at_call.c").path

    /// Compiles the preload into `directory` with the system's gcc and returns its path.
    static func buildKillShim(into directory: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let library = directory + "/kill_at_call.so"
        let gcc = Process()
        gcc.executableURL = URL(fileURLWithPath: "/usr/bin/gcc")
        gcc.arguments = ["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", library, source, "-ldl"]
        try gcc.run()
        gcc.waitUntilExit()
        XCTAssertEqual(gcc.terminationStatus, 0, "gcc \(source)")
        return library
    }
}
