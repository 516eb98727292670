internal import CSystemShims
import Glibc

/// A directory held open by descriptor, under which files are named by `AnchoredPath`s. The
/// directory itself is opened by the path given (which may pass through symbolic links: the person
/// named it); nothing beneath it is ever reached through one.
public final class DirectoryDescriptor: @unchecked Sendable {
    public let rawValue: Int32
    public let path: String

    /// The corresponding C function is `open` with O_DIRECTORY.
    public init(path: String) throws {
        self.path = path
        rawValue = try retryingEINTR("open", path: path) { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    }

    deinit { _ = Glibc.close(rawValue) }

    /// The file `relative` ("index/journal") beneath this directory.
    public func file(_ relative: String) -> AnchoredPath { AnchoredPath(directory: self, relative: relative) }
}

/// A path beneath a directory descriptor, resolved by the kernel with openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS): no component may be a symbolic link, so a link planted in the vault or
/// keychain directory can neither redirect a write nor be read through. Files are opened with
/// O_NOFOLLOW and must be regular files; temporaries are created with O_EXCL; renames and removals
/// use the parent's descriptor (renameat, unlinkat). Every refusal is an `UnsafeFileError`.
public struct AnchoredPath: CustomStringConvertible, Sendable {
    public let directory: DirectoryDescriptor
    /// Relative to `directory`; empty for the directory itself.
    public let relative: String

    public init(directory: DirectoryDescriptor, relative: String) {
        self.directory = directory
        self.relative = relative
    }

    /// The full path, for messages.
    public var path: String { relative.isEmpty ? directory.path : directory.path + "/" + relative }
    public var description: String { path }

    public func appending(_ name: String) -> AnchoredPath {
        AnchoredPath(directory: directory, relative: relative.isEmpty ? name : relative + "/" + name)
    }

    /// The last component.
    public var name: String { relative.split(separator: "/").last.map(String.init) ?? "" }

    /// The directory holding this file.
    public var parent: AnchoredPath {
        guard let slash = relative.lastIndex(of: "/") else { return AnchoredPath(directory: directory, relative: "") }
        return AnchoredPath(directory: directory, relative: String(relative[..<slash]))
    }

    // MARK: Opening

    /// Opens the file; it must be a regular file reached through no symbolic link. With O_CREAT |
    /// O_EXCL the file is new, so it needs no further check.
    public func open(flags: Int32, mode: mode_t = 0o600) throws -> FileDescriptor {
        let creating = flags & (O_CREAT | O_EXCL) == (O_CREAT | O_EXCL)
        // A FIFO opened for reading or writing only would block until its other end is opened.
        let nonBlocking = !creating && flags & O_ACCMODE != O_RDWR
        let all = flags | O_NOFOLLOW | O_CLOEXEC | (nonBlocking ? O_NONBLOCK : 0)
        let fd: Int32
        do {
            fd = try retryingEINTR("open", path: path) {
                vaultaire_open_beneath(directory.rawValue, relative.isEmpty ? "." : relative, all, UInt32(mode))
            }
        } catch let e as SystemError where e.errno == ELOOP || e.errno == ENXIO || e.errno == EXDEV {
            throw unsafeComponent()
                ?? UnsafeFileError(path: path, found: e.errno == ENXIO ? "a socket or device" : "a symbolic link")
        }
        let descriptor = FileDescriptor(adopting: fd, path: path)
        if !creating {
            var st = stat()
            try retryingEINTR("fstat", path: path) { fstat(fd, &st) }
            guard st.st_mode & S_IFMT == S_IFREG else {
                throw UnsafeFileError(path: path, found: UnsafeFileError.kind(st.st_mode))
            }
            if nonBlocking {
                let status = try retryingEINTR("fcntl", path: path) { fcntl(fd, F_GETFL) }
                try retryingEINTR("fcntl", path: path) { fcntl(fd, F_SETFL, status & ~O_NONBLOCK) }
            }
        }
        return descriptor
    }

    /// The whole file (at most `limit` bytes, else EFBIG).
    public func read(limit: Int) throws -> [UInt8] {
        try open(flags: O_RDONLY).readAll(limit: limit)
    }

    /// Whether something (of any kind, a symbolic link too) has this name; false when a directory on
    /// the way is missing.
    public func exists() throws -> Bool {
        try lstatMode() != nil
    }

    /// The file type and permission bits of the entry itself (not what a link points to), or nil.
    public func lstatMode() throws -> (mode: mode_t, uid: uid_t)? {
        try lstatEntry().map { ($0.st_mode, $0.st_uid) }
    }

    /// fstatat(AT_SYMLINK_NOFOLLOW) through the parent's descriptor; nil when nothing has the name.
    private func lstatEntry() throws -> stat? {
        let dir: FileDescriptor
        do { dir = try parentDescriptor() } catch let e as SystemError where e.errno == ENOENT { return nil }
        var st = stat()
        guard fstatat(dir.rawValue, name.isEmpty ? "." : name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return nil }
            throw SystemError(errno: errno, operation: "stat", path: path)
        }
        return st
    }

    /// What an entry is, how long, when it was last modified and changed, and which inode it is.
    public struct Status: Sendable {
        public let mode: mode_t
        public let size: Int
        /// Nanoseconds since the epoch.
        public let modified: Int64
        /// The inode's change time, in nanoseconds since the epoch: it moves with every change of
        /// contents or attributes, and no program can set it.
        public let changed: Int64
        public let device: UInt64
        public let inode: UInt64

        public var isRegularFile: Bool { mode & S_IFMT == S_IFREG }
        public var isDirectory: Bool { mode & S_IFMT == S_IFDIR }
    }

    /// The entry itself (a symbolic link is not followed), or nil when nothing has the name.
    public func status() throws -> Status? {
        guard let st = try lstatEntry() else { return nil }
        return Status(
            mode: st.st_mode, size: Int(st.st_size),
            modified: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
            changed: Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec),
            device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    // MARK: Changing

    /// Atomically replaces the file with `bytes`, durable once this returns: a temporary beside it
    /// (`name.tmp`, created O_EXCL) is written and synced, renamed over the file, and the directory synced.
    public func replace(with bytes: [UInt8], mode: mode_t = 0o600) throws {
        try replace(mode: mode) { try $0.write(bytes, at: 0) }
    }

    /// Atomic replacement as above, with `fill` writing the temporary's contents.
    public func replace(
        temporaryName: String? = nil, mode: mode_t = 0o600, _ fill: (FileDescriptor) throws -> Void
    ) throws {
        let temporary = parent.appending(temporaryName ?? name + ".tmp")
        let fd = try temporary.createExclusive(mode: mode, replacingStale: temporaryName == nil)
        do {
            try fill(fd)
            try fd.sync()
            try rename(from: temporary)
        } catch {
            try? temporary.remove()
            throw error
        }
        try parent.sync()
    }

    /// Creates the file, which must not exist. With `replacingStale`, a regular file left at this
    /// name (by an interrupted write) is removed first; anything else there is refused.
    public func createExclusive(mode: mode_t = 0o600, replacingStale: Bool = false) throws -> FileDescriptor {
        do {
            return try open(flags: O_RDWR | O_CREAT | O_EXCL, mode: mode)
        } catch let e as SystemError where e.errno == EEXIST && replacingStale {
            guard let (found, _) = try lstatMode() else { throw e }
            guard found & S_IFMT == S_IFREG else {
                throw UnsafeFileError(path: path, found: UnsafeFileError.kind(found))
            }
            try remove()
            return try open(flags: O_RDWR | O_CREAT | O_EXCL, mode: mode)
        }
    }

    /// Renames `source` (in the same directory) to this name, replacing what is there. The
    /// corresponding C function is `renameat`.
    public func rename(from source: AnchoredPath) throws {
        let from = try source.parentDescriptor()
        let to = try parentDescriptor()
        try retryingEINTR("rename", path: path) { renameat(from.rawValue, source.name, to.rawValue, name) }
    }

    /// Makes `link` (in the same directory) a new name of the file `source`, failing with EEXIST if
    /// the name is taken: a first-writer-wins create. The corresponding C function is `linkat`.
    public func link(from source: AnchoredPath) throws {
        let from = try source.parentDescriptor()
        let to = try parentDescriptor()
        try retryingEINTR("link", path: path) { linkat(from.rawValue, source.name, to.rawValue, name, 0) }
    }

    /// Removes the entry (a link itself, never its target); removing an absent one is no error.
    /// The corresponding C function is `unlinkat`.
    public func remove() throws {
        let dir: FileDescriptor
        do { dir = try parentDescriptor() } catch let e as SystemError where e.errno == ENOENT { return }
        if unlinkat(dir.rawValue, name, 0) != 0 && errno != ENOENT {
            throw SystemError(errno: errno, operation: "unlink", path: path)
        }
    }

    /// Creates this directory (0700 unless told) if it is missing; an existing one must be a directory.
    public func makeDirectory(mode: mode_t = 0o700) throws {
        let dir = try parentDescriptor()
        if mkdirat(dir.rawValue, name, mode) == 0 { return }
        guard errno == EEXIST else { throw SystemError(errno: errno, operation: "mkdir", path: path) }
        guard let (found, _) = try lstatMode() else { return }
        guard found & S_IFMT == S_IFDIR else { throw UnsafeFileError(path: path, found: UnsafeFileError.kind(found)) }
    }

    /// fsync of this directory (after a rename or a create in it).
    public func sync() throws {
        try openDirectory().sync()
    }

    /// This path as a directory, reached through no symbolic link.
    public func openDirectory() throws -> FileDescriptor {
        do {
            let fd = try retryingEINTR("open", path: path) {
                vaultaire_open_beneath(
                    directory.rawValue, relative.isEmpty ? "." : relative,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
            }
            return FileDescriptor(adopting: fd, path: path)
        } catch let e as SystemError where e.errno == ELOOP || e.errno == EXDEV {
            throw unsafeComponent() ?? UnsafeFileError(path: path, found: "a symbolic link")
        } catch let e as SystemError where e.errno == ENOTDIR {
            throw unsafeComponent() ?? e
        }
    }

    /// One name in a directory listing, with what it is (a link is never followed to find out).
    public struct Entry: Sendable {
        public let name: String
        public let isDirectory: Bool
    }

    /// The entries of this directory (without "." and ".."), reached through no symbolic link. The
    /// corresponding C functions are `fdopendir` and `readdir`.
    public func entries() throws -> [Entry] {
        let fd = try openDirectory()
        // fdopendir takes the descriptor it is given; closedir closes this duplicate.
        let copy = try retryingEINTR("dup", path: path) { dup(fd.rawValue) }
        guard let dir = fdopendir(copy) else {
            let e = errno
            _ = Glibc.close(copy)
            throw SystemError(errno: e, operation: "opendir", path: path)
        }
        defer { closedir(dir) }
        var found: [Entry] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." { continue }
            var isDirectory = Int32(entry.pointee.d_type) == DT_DIR
            if Int32(entry.pointee.d_type) == DT_UNKNOWN {
                var st = stat()
                isDirectory =
                    fstatat(fd.rawValue, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mode & S_IFMT == S_IFDIR
            }
            found.append(Entry(name: name, isDirectory: isDirectory))
        }
        return found
    }

    private func parentDescriptor() throws -> FileDescriptor {
        try parent.openDirectory()
    }

    /// The first component of the path that is a symbolic link or not a directory where one is
    /// needed, as an error naming it; nil when none is (the failure was something else).
    private func unsafeComponent() -> UnsafeFileError? {
        var walked = ""
        let parts = relative.split(separator: "/")
        for (i, part) in parts.enumerated() {
            walked += (walked.isEmpty ? "" : "/") + part
            var st = stat()
            guard fstatat(directory.rawValue, walked, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
            let kind = st.st_mode & S_IFMT
            let full = directory.path + "/" + walked
            if kind == S_IFLNK { return UnsafeFileError(path: full, found: "a symbolic link") }
            if i < parts.count - 1 && kind != S_IFDIR {
                return UnsafeFileError(path: full, found: UnsafeFileError.kind(st.st_mode))
            }
            if i == parts.count - 1 && kind != S_IFREG && kind != S_IFDIR {
                return UnsafeFileError(path: full, found: UnsafeFileError.kind(st.st_mode))
            }
        }
        return nil
    }
}
