import Foundation
import Glibc

/// Runs programs for the integration tests with posix_spawn, output to files: no pipes to fill up,
/// and no reliance on Foundation's child monitoring (which the mount's daemonizing fork confuses).
public final class ProcessRunner {
    public struct Result {
        public let status: Int32
        public let stdout: String
        public let stderr: String
        /// The lines of stderr other than the weak-KDF warning every command prints for the test
        /// vaults (made with small counts).
        public var errorLines: [Substring] {
            stderr.split(separator: "\n").filter { !$0.hasPrefix(weakKDFWarningPrefix) }
        }
    }

    public var environment: [String: String]
    public let scratch: String
    /// Everything every command printed, for leak checks.
    public private(set) var outputs: [String] = []

    public init(environment: [String: String], scratch: String) {
        self.environment = environment
        self.scratch = scratch
    }

    /// The built `vaultaire` binary, found beside the test bundle.
    public static var vaultaireBinary: String {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("vaultaire").path) && dir.path != "/" {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("vaultaire").path
    }

    @discardableResult
    public func run(
        _ path: String, _ args: [String], input: String? = nil, extraEnvironment: [String: String] = [:]
    ) throws -> Result {
        let out = scratch + "/.out-\(UInt32.random(in: 0...UInt32.max))"
        let err = out + ".err"
        let inp = out + ".in"
        FileManager.default.createFile(atPath: inp, contents: Data((input ?? "").utf8))
        defer { for f in [out, err, inp] { unlink(f) } }
        let pid = try spawn(path, args, stdin: inp, stdout: out, stderr: err, extraEnvironment: extraEnvironment)
        let status = ProcessRunner.wait(pid)
        let r = Result(
            status: status, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
        outputs.append(r.stdout + r.stderr)
        return r
    }

    /// Starts a program in the background; the caller kills and `wait`s for it.
    public func spawn(
        _ path: String, _ args: [String], stdin: String = "/dev/null", stdout: String = "/dev/null",
        stderr: String = "/dev/null", extraEnvironment: [String: String] = [:]
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([path] + args).map { strdup($0) } + [nil]
        let envp = environment.merging(extraEnvironment) { $1 }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid = pid_t()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard rc == 0 else { throw NSError(domain: "posix_spawn \(path)", code: Int(rc)) }
        return pid
    }

    /// Waits for `pid`; returns its exit status, or 128 + the signal that ended it.
    @discardableResult
    public static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

/// How the command's warning about a vault whose KDF counts are below the floors begins.
public let weakKDFWarningPrefix = "Warning: weak key derivation:"
