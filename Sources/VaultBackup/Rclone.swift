import Glibc
import VaultSystem

/// The remote, reached only through the `rclone` command line (docs/FORMAT.md, "Backups"). rclone is
/// given paths and ciphertext, never a key or credential; its own configuration (`rclone config`,
/// RCLONE_* variables, or an on-the-fly remote such as `:sftp,host=…:path`) says how to reach the store.
public final class Rclone {
    /// `REMOTE:PATH` as the user gave it, without trailing slashes.
    public let remote: String
    /// The program to run: `rclone` on PATH, or VAULTAIRE_RCLONE.
    let program: String
    /// Receives rclone's one-line transfer statistics (bytes, rate, ETA) when set, for a progress line.
    public var progress: ((String) -> Void)?

    public init(remote: String) {
        var r = remote
        while r.hasSuffix("/") && !r.hasSuffix(":/") && r.count > 1 { r.removeLast() }
        self.remote = r
        self.program = FileSystem.environment("VAULTAIRE_RCLONE") ?? "rclone"
    }

    /// `REMOTE:PATH/relative`, joined so that a bucket root (`s3:`) stays relative to the remote.
    public func path(_ relative: String) -> String {
        if relative.isEmpty { return remote }
        return remote.hasSuffix(":") || remote.hasSuffix("/") ? remote + relative : remote + "/" + relative
    }

    struct Outcome {
        var status: Int32
        var stdout: [UInt8]
        var stderr: [UInt8]

        /// rclone's last error line without its timestamp, for a one-line message.
        var reason: String {
            let lines = String(decoding: stderr, as: UTF8.self).split(separator: "\n").map(String.init)
            let pick =
                lines.last(where: { $0.contains("ERROR") || $0.contains("Failed") || $0.contains("CRITICAL") }) ?? lines
                .last ?? "exit status \(status)"
            var text = pick
            // "2026/12/04 15:48:43 " before each line.
            if text.count > 20, text.prefix(20).allSatisfy({ $0.isNumber || $0 == "/" || $0 == ":" || $0 == " " }) {
                text = String(text.dropFirst(20))
            }
            if let r = text.range(of: "ERROR : ") {
                text = String(text[r.upperBound...])
            } else if let r = text.range(of: "CRITICAL: ") {
                text = String(text[r.upperBound...])
            }
            return String(text.prefix(300))
        }
    }

    /// rclone's exit status when the directory (the backup's root) does not exist.
    static let directoryNotFound: Int32 = 3

    /// Runs rclone with `arguments`, collecting its output; progress lines go to `progress`.
    func run(_ arguments: [String], statistics: Bool = false) throws -> Outcome {
        // Flags go right after the subcommand: the paths come last, after "--", so that a remote
        // named like a flag is never read as one.
        var args = [program] + arguments.prefix(1)
        if statistics && progress != nil {
            args += ["--stats", "1s", "--stats-one-line", "--stats-log-level", "NOTICE"]
        }
        args += arguments.dropFirst()
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        // pipe2 is not visible to Swift here; no other thread starts processes (a pipeline's helper
        // thread only reads, hashes and moves files), so setting FD_CLOEXEC right after pipe() leaves
        // no window for another spawn to inherit them.
        guard Rclone.pipeCloseOnExec(&out) else { throw SystemError(errno: errno, operation: "pipe") }
        guard Rclone.pipeCloseOnExec(&err) else {
            let e = errno
            close(out[0])
            close(out[1])
            throw SystemError(errno: e, operation: "pipe")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, out[1], 1)
        posix_spawn_file_actions_adddup2(&actions, err[1], 2)
        let cArgs = args.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var pid = pid_t()
        let rc = posix_spawnp(&pid, program, &actions, nil, cArgs, environ)
        close(out[1])
        close(err[1])
        guard rc == 0 else {
            close(out[0])
            close(err[0])
            throw BackupError.rcloneMissing(reason: "\(program): \(String(cString: strerror(rc)))")
        }
        var outcome = Outcome(status: 0, stdout: [], stderr: [])
        var pending: [UInt8] = []
        var fds = [
            pollfd(fd: out[0], events: Int16(POLLIN), revents: 0),
            pollfd(fd: err[0], events: Int16(POLLIN), revents: 0),
        ]
        var open = 2
        var buffer = [UInt8](repeating: 0, count: 65536)
        while open > 0 {
            if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { break } }
            for i in 0..<2 where fds[i].fd >= 0 && fds[i].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fds[i].fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    close(fds[i].fd)
                    fds[i].fd = -1
                    open -= 1
                    continue
                }
                if i == 0 {
                    outcome.stdout += buffer[0..<n]
                } else {
                    outcome.stderr += buffer[0..<n]
                    pending += buffer[0..<n]
                    while let nl = pending.firstIndex(of: 10) {
                        let line = String(decoding: pending[..<nl], as: UTF8.self)
                        pending.removeSubrange(...nl)
                        if let progress, line.contains("ETA") { progress(Rclone.statistics(line)) }
                    }
                    // Only the tail is kept for the error message.
                    if outcome.stderr.count > 1 << 20 { outcome.stderr.removeFirst(outcome.stderr.count - (1 << 16)) }
                }
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        outcome.status = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        if outcome.status == 127 { throw BackupError.rcloneMissing(reason: "\(program) not found") }
        return outcome
    }

    static func pipeCloseOnExec(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return true
    }

    /// "2026/12/04 15:50:01 NOTICE: 1.2 MiB / 10 MiB, 12%, 1 MiB/s, ETA 7s" → the part after NOTICE.
    static func statistics(_ line: String) -> String {
        guard let r = line.range(of: "NOTICE: ") else { return line }
        return line[r.upperBound...].trimmingWhitespace
    }

    /// Every file under the backup's root as "path;size" (paths relative to it), or nil when the root
    /// does not exist.
    public func list() throws -> [String]? {
        // Few retries: an unreachable remote is reported in seconds, not after rclone's minutes of backing off.
        let r = try run([
            "lsf", "-R", "--files-only", "--retries", "1", "--low-level-retries", "2", "--contimeout", "15s",
            "--format", "ps", "--separator", ";", "--", remote,
        ])
        if r.status == Rclone.directoryNotFound { return nil }
        guard r.status == 0 else { throw BackupError.remoteUnreachable(remote: remote, reason: r.reason) }
        return String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Uploads `files` (paths relative to `directory`, which become paths under the root), following
    /// symbolic links. The list of names goes through `listFile`, written by the caller.
    public func upload(from directory: String, listFile: String) throws {
        let r = try run(
            ["copy", "--files-from", listFile, "--copy-links", "--no-check-dest", "--", directory, remote],
            statistics: true)
        guard r.status == 0 else { throw BackupError.remoteUnreachable(remote: remote, reason: r.reason) }
    }

    /// Downloads the files named in `listFile` (relative to the root) into `directory`; without
    /// `checksums`, rclone does not check each file's checksum after the copy.
    public func download(to directory: String, listFile: String, checksums: Bool = true) throws {
        let r = try run(
            ["copy", "--files-from", listFile, "--no-traverse"] + (checksums ? [] : ["--ignore-checksum"])
                + ["--", remote, directory], statistics: true)
        guard r.status == 0 else { throw BackupError.remoteUnreachable(remote: remote, reason: r.reason) }
    }

    /// Deletes the files named in `listFile` (relative to the root).
    public func delete(listFile: String) throws {
        let r = try run(["delete", "--files-from", listFile, "--", remote])
        guard r.status == 0 else { throw BackupError.remoteUnreachable(remote: remote, reason: r.reason) }
    }
}
