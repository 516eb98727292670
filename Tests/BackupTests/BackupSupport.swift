import Foundation
import Glibc
import TestSupport
import XCTest

/// A private world for backup tests: a vault made through the real `vaultaire` binary, a file
/// keychain per simulated device (each its own XDG_DATA_HOME), and rclone with an empty config.
final class BackupWorld {
    let root: String
    let runner: ProcessRunner
    let binary = ProcessRunner.vaultaireBinary
    var vault: String { root + "/vault" }
    var passphraseFile: String { root + "/pw" }
    var phraseFile: String { root + "/phrase" }
    var devices = 0

    init() throws {
        root = "/tmp/vaultaire-backup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        runner = ProcessRunner(
            environment: [
                "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": root,
                "XDG_DATA_HOME": root + "/device-0", "VAULTAIRE_ALLOW_WEAK_KDF": "1",
                "VAULTAIRE_KEYCHAIN": "file", "RCLONE_CONFIG": root + "/rclone.conf", "LC_ALL": "C",
            ],
            scratch: root)
        write("pw", Data("backup test passphrase\n".utf8))
        try vaultaire([
            "init", vault, "--passphrase-file", passphraseFile, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", phraseFile,
        ])
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    @discardableResult
    func write(_ name: String, _ data: Data) -> String {
        let path = root + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        return path
    }

    /// A new device: an empty keychain (and backup state) of its own.
    func freshDevice() -> [String: String] {
        devices += 1
        return ["XDG_DATA_HOME": root + "/device-\(devices)"]
    }

    /// Runs vaultaire; fails the test (with its stderr) when the status is not `expect`.
    @discardableResult
    func vaultaire(
        _ args: [String], device: [String: String] = [:], expect: Int32 = 0,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> ProcessRunner.Result {
        let r = try runner.run(binary, args, extraEnvironment: device)
        XCTAssertEqual(
            r.status, expect, "vaultaire \(args.joined(separator: " ")): \(r.stderr)", file: file, line: line)
        return r
    }

    @discardableResult
    func rclone(_ args: [String], file: StaticString = #filePath, line: UInt = #line) throws -> ProcessRunner.Result {
        let r = try runner.run("/usr/bin/rclone", args)
        XCTAssertEqual(r.status, 0, "rclone \(args.joined(separator: " ")): \(r.stderr)", file: file, line: line)
        return r
    }

    /// Every file under the remote's root, relative to it.
    func remoteFiles(_ remote: String) throws -> Set<String> {
        let r = try runner.run("/usr/bin/rclone", ["lsf", "-R", "--files-only", remote])
        return Set(r.stdout.split(separator: "\n").map(String.init))
    }

    /// The largest object on the remote: the blob of the biggest file, which every snapshot of the
    /// tests names (a small one may be an index file only an older snapshot needs).
    func largestObject(_ remote: String) throws -> String {
        let r = try runner.run(
            "/usr/bin/rclone", ["lsf", "-R", "--files-only", "--format", "ps", "--separator", ";", remote])
        let sized = r.stdout.split(separator: "\n").compactMap { line -> (String, Int)? in
            let f = line.split(separator: ";")
            guard f.count == 2, f[0].hasPrefix("objects/"), let n = Int(f[1]) else { return nil }
            return (String(f[0]), n)
        }
        return sized.max { $0.1 < $1.1 }!.0
    }

    func join(_ remote: String, _ relative: String) -> String {
        remote.hasSuffix(":") ? remote + relative : remote + "/" + relative
    }

    /// Puts `files` (path inside the vault → contents) into the vault, making directories as needed.
    func put(_ files: [String: Data], into vault: String? = nil) throws {
        let v = vault ?? self.vault
        var made = Set<String>()
        for (path, data) in files.sorted(by: { $0.key < $1.key }) {
            var dir = ""
            for part in path.split(separator: "/").dropLast() {
                dir += "/" + part
                if made.insert(dir).inserted {
                    _ = try runner.run(binary, ["mkdir", v, dir, "--passphrase-file", passphraseFile])
                }
            }
            let local = write("put-\(UInt32.random(in: 0...UInt32.max))", data)
            try vaultaire(["put", v, local, path, "--passphrase-file", passphraseFile])
            unlink(local)
        }
    }

    /// The whole tree of regular files in a vault (path → contents), read back through `ls` and `get`.
    func tree(
        of vault: String, passphraseFile pw: String? = nil, device: [String: String] = [:]
    ) throws -> [String: Data] {
        var out: [String: Data] = [:]
        var stack = ["/"]
        while let dir = stack.popLast() {
            let r = try vaultaire(["ls", vault, dir, "--passphrase-file", pw ?? passphraseFile], device: device)
            for line in r.stdout.split(separator: "\n") {
                guard let name = line.split(separator: " ").last else { continue }
                let path = (dir == "/" ? "" : dir) + "/" + name
                if line.hasPrefix("d") {
                    stack.append(path)
                    continue
                }
                let local = root + "/get-\(UInt32.random(in: 0...UInt32.max))"
                try vaultaire(["get", vault, path, local, "--passphrase-file", pw ?? passphraseFile], device: device)
                out[path] = try Data(contentsOf: URL(fileURLWithPath: local))
                unlink(local)
            }
        }
        return out
    }

    /// `count` random bytes (from /dev/urandom: tests put tens of megabytes).
    static func random(_ count: Int) -> Data {
        let urandom = FileHandle(forReadingAtPath: "/dev/urandom")!
        defer { try? urandom.close() }
        return urandom.readData(ofLength: count)
    }

    /// The number in "<label> N" in a summary line, e.g. "uploaded 3 objects".
    static func number(after label: String, in text: String) -> Int? {
        guard let r = text.range(of: label) else { return nil }
        return Int(text[r.upperBound...].prefix { $0.isNumber })
    }

    /// The number in "N <label>" in a summary line, e.g. "5 objects already there".
    static func number(before label: String, in text: String) -> Int? {
        guard let r = text.range(of: " " + label) else { return nil }
        return Int(String(text[..<r.lowerBound].reversed().prefix { $0.isNumber }.reversed()))
    }
}

/// rclone behind a script that records each `copy` — its list of names, in the order of the runs —
/// notes whether two ever ran at once, and can refuse one upload the way an unreachable remote would.
/// Given to vaultaire through VAULTAIRE_RCLONE (`environment`).
final class RcloneRecorder {
    let directory: String
    let script: String

    /// `failingUpload`: the number (from 1) of the upload to refuse, with "simulated failure of upload N".
    init(in world: BackupWorld, name: String, failingUpload: Int? = nil) throws {
        directory = world.root + "/" + name
        script = directory + "/rclone"
        try FileManager.default.createDirectory(atPath: directory + "/runs", withIntermediateDirectories: true)
        let text = """
            #!/bin/bash
            runs='\(directory)/runs'
            [ "$1" = copy ] || exec /usr/bin/rclone "$@"
            direction=down list= previous=
            for a in "$@"; do
              [ "$a" = --copy-links ] && direction=up
              [ "$previous" = --files-from ] && list="$a"
              previous="$a"
            done
            n=$(( $(ls "$runs" | grep -c "^$direction-[0-9]*$") + 1 ))
            cp "$list" "$runs/$direction-$n"
            mkdir "$runs/running" 2>/dev/null || touch "$runs/overlapped"
            if [ "$direction" = up ] && [ "$n" = "\(failingUpload ?? 0)" ]; then
              echo "$(date '+%Y/%m/%d %H:%M:%S') ERROR : simulated failure of upload $n" >&2
              rmdir "$runs/running"
              exit 1
            fi
            /usr/bin/rclone "$@"
            status=$?
            rmdir "$runs/running"
            exit $status

            """
        try text.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
    }

    var environment: [String: String] { ["VAULTAIRE_RCLONE": script] }

    /// The names each upload (or download) sent, in the order of the runs.
    func runs(_ direction: String) -> [[String]] {
        var out: [[String]] = []
        while let text = try? String(contentsOfFile: "\(directory)/runs/\(direction)-\(out.count + 1)", encoding: .utf8)
        {
            out.append(text.split(separator: "\n").map(String.init))
        }
        return out
    }

    var uploads: [[String]] { runs("up") }
    var downloads: [[String]] { runs("down") }

    /// Whether a run started while another was still going.
    var overlapped: Bool { FileManager.default.fileExists(atPath: directory + "/runs/overlapped") }
}

/// A TCP port nothing listens on right now.
func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw NSError(domain: "socket", code: Int(errno)) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else { throw NSError(domain: "bind", code: Int(errno)) }
    return UInt16(bigEndian: address.sin_port)
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port`.
func waitForListener(_ port: UInt16, seconds: Double) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let ok = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(fd)
        if ok { return true }
        usleep(100_000)
    }
    return false
}

/// A real server the test starts as its child and stops at the end: Debian's OpenSSH sshd, or moto's S3.
final class TestServer {
    let pid: pid_t
    let port: UInt16
    /// The rclone remote (on the fly) for `path` on this server.
    let remote: (String) -> String

    private init(pid: pid_t, port: UInt16, remote: @escaping (String) -> String) {
        self.pid = pid
        self.port = port
        self.remote = remote
    }

    deinit {
        kill(pid, SIGTERM)
        ProcessRunner.wait(pid)
    }

    /// Skips the test loudly when a server cannot be had — or fails it where CI demands the real parts.
    static func unavailable(_ why: String) -> Error {
        if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
            XCTFail("\(why), and VAULTAIRE_REQUIRE_FUSE=1 (CI) forbids skipping the backup server tests")
        }
        return XCTSkip("!!! \(why): backup server test SKIPPED !!!")
    }

    /// sshd -D on a free port with a throwaway host key and user key; the remote goes through rclone's sftp backend.
    static func sshd(in world: BackupWorld) throws -> TestServer {
        guard access("/usr/sbin/sshd", X_OK) == 0 else {
            throw unavailable("/usr/sbin/sshd is not installed (Debian's openssh-server)")
        }
        let dir = world.root + "/sshd"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for key in ["host", "user"] {
            let r = try world.runner.run(
                "/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", dir + "/" + key])
            guard r.status == 0 else { throw unavailable("ssh-keygen failed: \(r.stderr)") }
        }
        try FileManager.default.copyItem(atPath: dir + "/user.pub", toPath: dir + "/authorized_keys")
        // sshd refuses to start without its privilege separation directory.
        try? FileManager.default.createDirectory(
            atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let port = try freePort()
        let user = String(cString: getpwuid(getuid())!.pointee.pw_name)
        let config = """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(dir)/host
            PidFile \(dir)/sshd.pid
            AuthorizedKeysFile \(dir)/authorized_keys
            PubkeyAuthentication yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            PermitRootLogin prohibit-password
            AllowUsers \(user)
            Subsystem sftp internal-sftp
            LogLevel ERROR

            """
        try config.write(toFile: dir + "/sshd_config", atomically: true, encoding: .utf8)
        let hostKey = try String(contentsOfFile: dir + "/host.pub", encoding: .utf8).split(separator: " ").prefix(2)
            .joined(separator: " ")
        try "[127.0.0.1]:\(port) \(hostKey)\n".write(toFile: dir + "/known_hosts", atomically: true, encoding: .utf8)
        let pid = try world.runner.spawn(
            "/usr/sbin/sshd", ["-D", "-e", "-f", dir + "/sshd_config"], stderr: dir + "/sshd.log")
        let server = TestServer(pid: pid, port: port) { path in
            ":sftp,host=127.0.0.1,port=\(port),user=\(user),key_file=\(dir)/user,known_hosts_file=\(dir)/known_hosts:\(path)"
        }
        guard waitForListener(port, seconds: 10) else {
            let log = (try? String(contentsOfFile: dir + "/sshd.log", encoding: .utf8)) ?? ""
            throw unavailable("sshd did not start: \(log)")
        }
        return server
    }

    /// moto's standalone S3 server (PyPI `moto[server]`) on a free port; the remote goes through rclone's s3 backend.
    static func moto(in world: BackupWorld) throws -> TestServer {
        // The Python that scripts/install-deps.sh installed moto into: the first python3 on the test's PATH.
        let inherited = ProcessInfo.processInfo.environment
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "import sys, moto.server; print(sys.executable)"]
        let out = Pipe()
        probe.standardOutput = out
        probe.standardError = FileHandle.nullDevice
        probe.environment = inherited
        try probe.run()
        let executable = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        probe.waitUntilExit()
        guard probe.terminationStatus == 0, !executable.isEmpty else {
            throw unavailable("python3 cannot import moto.server (pip install 'moto[server]')")
        }
        let port = try freePort()
        let pid = try world.runner.spawn(
            executable, ["-m", "moto.server", "-H", "127.0.0.1", "-p", "\(port)"],
            stderr: world.root + "/moto.log", extraEnvironment: ["HOME": inherited["HOME"] ?? "/root"])
        let server = TestServer(pid: pid, port: port) { path in
            ":s3,provider=Other,endpoint='http://127.0.0.1:\(port)',access_key_id=test,secret_access_key=test,region=us-east-1:\(path)"
        }
        guard waitForListener(port, seconds: 30) else {
            let log = (try? String(contentsOfFile: world.root + "/moto.log", encoding: .utf8)) ?? ""
            throw unavailable("moto_server did not start: \(log)")
        }
        return server
    }
}
