import Glibc
import VaultSystem

/// A private temporary directory (mode 0700, made with mkdtemp) for what passes between Vaultaire and
/// rclone: lists of names, manifests, downloaded objects. Files in it are created with
/// O_EXCL | O_NOFOLLOW, so nothing planted there in advance is followed or reused. Removed with
/// everything in it when released.
public final class Staging {
    public let path: String

    /// A new directory `parent/.vaultaire-<what>-XXXXXX`; `parent` defaults to TMPDIR or /tmp.
    public init(what: String, in parent: String? = nil) throws {
        let base = parent ?? FileSystem.environment("TMPDIR") ?? "/tmp"
        var template = Array((base + "/.vaultaire-\(what)-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SystemError(errno: errno, operation: "mkdtemp", path: base)
        }
        path = String(cString: made)
    }

    deinit { Staging.removeTree(path) }

    /// A parent for a staging directory that holds only small files and symbolic links: a memory
    /// filesystem where there is one (XDG_RUNTIME_DIR, which is one by its specification; else
    /// /dev/shm), else TMPDIR or /tmp. A backup stages a link per object, and a new inode costs a
    /// disk filesystem far more than memory does (half a millisecond each on ext4 after many
    /// deletions, against microseconds: seconds for 10,000 files).
    public static var memoryBackedParent: String? {
        for candidate in [FileSystem.environment("XDG_RUNTIME_DIR"), "/dev/shm"] {
            if let c = candidate, FileSystem.isDirectory(c), access(c, W_OK | X_OK) == 0 { return c }
        }
        return nil
    }

    /// Writes `bytes` to a new file `relative` (parents made as needed); fails if it exists.
    public func write(_ relative: String, _ bytes: [UInt8]) throws {
        let full = path + "/" + relative
        try makeParents(of: relative)
        let fd = try FileDescriptor(path: full, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
        try fd.write(bytes, at: 0)
    }

    /// Writes a new file at `path` (O_EXCL | O_NOFOLLOW: nothing planted there is followed or
    /// reused) and syncs it.
    public static func createFile(_ path: String, _ bytes: [UInt8]) throws {
        let fd = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
        try fd.write(bytes, at: 0)
        try fd.sync()
    }

    /// A list of names for rclone's --files-from, one a line.
    public func writeList(_ name: String, _ lines: [String]) throws -> String {
        try write(name, Array(lines.map { $0 + "\n" }.joined().utf8))
        return path + "/" + name
    }

    /// A symbolic link `relative` → `target`, so rclone uploads the target under this name. Not a hard
    /// link: linking and unlinking a vault file would move its ctime, which the hash cache relies on to
    /// see a file changed behind its back, and a backup killed midway would leave links that keep
    /// deleted blobs on disk.
    public func link(_ relative: String, to target: String) throws {
        try makeParents(of: relative)
        guard symlink(target, path + "/" + relative) == 0 else {
            throw SystemError(errno: errno, operation: "symlink", path: path + "/" + relative)
        }
    }

    public func makeParents(of relative: String) throws {
        var dir = path
        for part in relative.split(separator: "/").dropLast() {
            dir += "/" + part
            try FileSystem.makeDirectory(dir)
        }
    }

    /// Removes a directory tree without following symbolic links.
    static func removeTree(_ root: String) {
        guard let dir = opendir(root) else {
            unlink(root)
            return
        }
        var children: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { children.append(name) }
        }
        closedir(dir)
        for c in children {
            let p = root + "/" + c
            var st = stat()
            if lstat(p, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { removeTree(p) } else { unlink(p) }
        }
        rmdir(root)
    }
}
