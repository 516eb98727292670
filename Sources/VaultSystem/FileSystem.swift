internal import CSystemShims
import Glibc

/// Whole-file and directory helpers with the crash-safety rules of the vault:
/// replace = write-new + fsync + rename + fsync(directory).
public enum FileSystem {
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Whether anything is at `path`, a dangling symlink included.
    public static func lexists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    public static func readFile(_ path: String, limit: Int = 1 << 30) throws -> [UInt8] {
        try FileDescriptor(path: path, flags: O_RDONLY).readAll(limit: limit)
    }

    /// Atomically replaces `path` with `bytes` (mode `mode`), durable once this returns; the file and
    /// its temporary are reached through no symbolic link (see `AnchoredPath.replace`).
    public static func replaceFile(_ path: String, with bytes: [UInt8], mode: mode_t = 0o600) throws {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        try DirectoryDescriptor(path: parent(of: path)).file(name).replace(with: bytes, mode: mode)
    }

    public static func syncDirectory(containing path: String) throws {
        try syncDirectory(parent(of: path))
    }

    public static func syncDirectory(_ dir: String) throws {
        let fd = try FileDescriptor(path: dir, flags: O_RDONLY | O_DIRECTORY)
        try fd.sync()
    }

    /// syncfs(2): every write to the filesystem holding `path` is durable when this returns.
    public static func syncFileSystem(containing path: String) throws {
        let fd = try FileDescriptor(path: path, flags: O_RDONLY | O_DIRECTORY)
        try retryingEINTR("syncfs", path: path) { vaultaire_syncfs(fd.rawValue) }
    }

    /// No core dumps and no same-user ptrace while keys are held (prctl PR_SET_DUMPABLE 0).
    public static func disableCoreDumps() -> Bool { vaultaire_disable_core_dumps() == 0 }

    /// For a thread that works in the background: named (as ps and /proc show it), and free to run on
    /// any of the process's CPUs whichever thread started it.
    public static func becomeBackgroundThread(named name: String) { vaultaire_background_thread(name) }

    /// Gives the calling thread the nice value `nice` (higher: less CPU when others want it); false
    /// if the system refused.
    @discardableResult
    public static func niceThread(_ nice: Int32) -> Bool { vaultaire_thread_nice(nice) == 0 }

    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws {
        if mkdir(path, mode) != 0 && errno != EEXIST {
            throw SystemError(errno: errno, operation: "mkdir", path: path)
        }
    }

    /// Creates `path` and any missing parents.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            try makeDirectory(current, mode: mode)
        }
    }

    public static func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT {
            throw SystemError(errno: errno, operation: "unlink", path: path)
        }
    }

    public static func listDirectory(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw SystemError(errno: errno, operation: "opendir", path: path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    public static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let p = String(path[..<slash])
        return p.isEmpty ? "/" : p
    }

    /// The path with symbolic links, "." and ".." resolved (realpath), or nil if it does not exist.
    public static func canonicalPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    public static func fileMode(_ path: String) -> (mode: mode_t, uid: uid_t)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return (st.st_mode, st.st_uid)
    }

    /// The environment variable `name`, or nil when unset or empty.
    /// This machine's host name (`gethostname`), or "this device" when it has none.
    public static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "this device" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "this device" : name
    }

    /// The type of the filesystem holding `directory` (statfs's f_type: 0xEF53 for ext4), or nil.
    public static func filesystemType(of directory: DirectoryDescriptor) -> Int64? {
        let type = vaultaire_filesystem_type(directory.rawValue)
        return type < 0 ? nil : Int64(type)
    }

    /// `$XDG_CACHE_HOME/vaultaire/<name>`, or `$HOME/.cache/vaultaire/<name>`: where the program keeps
    /// what only saves time and may be lost. Nil when neither variable is set.
    public static func cacheDirectory(_ name: String) -> String? {
        if let cache = environment("XDG_CACHE_HOME") { return cache + "/vaultaire/" + name }
        if let home = environment("HOME") { return home + "/.cache/vaultaire/" + name }
        return nil
    }

    public static func environment(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        let s = String(cString: v)
        return s.isEmpty ? nil : s
    }
}
