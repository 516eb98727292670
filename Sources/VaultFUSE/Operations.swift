internal import CFuse
import Glibc
import VaultFS
import VaultFormat
import VaultSystem

// One small function per FUSE operation, all filled into a single table by `makeOperations()`.
// Each reaches the vault through the context's private data, turns errors into -errno, and never
// lets a Swift error cross into C.

@inline(__always)
private func mounted() -> MountedVault {
    let mv = Unmanaged<MountedVault>.fromOpaque(CFuse_private_data()!).takeUnretainedValue()
    mv.touch()
    return mv
}

@inline(__always)
private func run(_ operation: String, _ body: (MountedVault) throws -> Int32) -> Int32 {
    let mv = mounted()
    do { return try body(mv) } catch { return mv.fail(error, operation) }
}

private func pathString(_ path: UnsafePointer<CChar>?) throws -> String {
    guard let path else { throw FSError(ENOENT) }
    guard let s = String(validatingCString: path) else { throw FSError(EILSEQ, "file names must be UTF-8") }
    return s
}

private func handle(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> FileHandle? {
    guard let fi, fi.pointee.fh != 0 else { return nil }
    return Unmanaged<FileHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!).takeUnretainedValue()
}

private func store(_ h: FileHandle, in fi: UnsafeMutablePointer<fuse_file_info>?) {
    fi?.pointee.fh = UInt64(UInt(bitPattern: Unmanaged.passRetained(h).toOpaque()))
}

private func caller() -> Caller { Caller(uid: CFuse_caller_uid(), gid: CFuse_caller_gid()) }

private func split(_ path: String) throws -> (parentPath: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { throw FSError(EINVAL) }
    let name = String(path[path.index(after: slash)...])
    let parent = String(path[..<slash])
    return (parent.isEmpty ? "/" : parent, name)
}

private func parentAndName(_ mv: MountedVault, _ path: UnsafePointer<CChar>?) throws -> (UInt64, String) {
    let (parentPath, name) = try split(try pathString(path))
    let parent = try mv.vault.resolve(parentPath)
    guard parent.kind == .directory else { throw FSError(ENOTDIR) }
    return (parent.id, name)
}

private func timespecFrom(_ ns: Int64) -> timespec {
    var sec = ns / 1_000_000_000, nsec = ns % 1_000_000_000
    if nsec < 0 { sec -= 1; nsec += 1_000_000_000 }
    return timespec(tv_sec: Int(sec), tv_nsec: Int(nsec))
}

private func typeBits(_ kind: Inode.Kind) -> mode_t {
    switch kind {
    case .file: return S_IFREG
    case .directory: return S_IFDIR
    case .symlink: return S_IFLNK
    case .fifo: return S_IFIFO
    case .socket: return S_IFSOCK
    case .characterDevice: return S_IFCHR
    case .blockDevice: return S_IFBLK
    }
}

private func fill(_ st: UnsafeMutablePointer<stat>, _ n: Inode, _ mv: MountedVault) {
    memset(st, 0, MemoryLayout<stat>.size)
    st.pointee.st_ino = UInt(n.id)
    st.pointee.st_mode = typeBits(n.kind) | mode_t(n.permissions)
    st.pointee.st_nlink = UInt(n.linkCount)
    st.pointee.st_uid = n.uid
    st.pointee.st_gid = n.gid
    st.pointee.st_rdev = UInt(n.deviceNumber)
    st.pointee.st_size = n.kind == .directory ? 4096 : Int(n.size)
    st.pointee.st_blksize = mv.preferredBlockSize
    st.pointee.st_blocks = (Int(n.size) + 511) / 512
    st.pointee.st_atim = timespecFrom(n.accessTime)
    st.pointee.st_mtim = timespecFrom(n.modificationTime)
    st.pointee.st_ctim = timespecFrom(n.changeTime)
}

// MARK: Attributes and lookups

private let opGetattr: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<stat>?, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, st, fi in
    run("getattr") { mv in
        let node = try handle(fi).map { try mv.vault.attributes($0.id) } ?? (try mv.vault.resolve(try pathString(path)))
        fill(st!, node, mv)
        return 0
    }
}

// opendir keeps the directory's inode number in fh: with nullpath_ok, readdir may get no path.
private let opOpendir: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, fi in
    run("opendir") { mv in
        let dir = try mv.vault.resolve(try pathString(path))
        guard dir.kind == .directory else { throw FSError(ENOTDIR) }
        fi!.pointee.fh = dir.id
        return 0
    }
}

private let opReaddir: @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?, fuse_fill_dir_t?, off_t, UnsafeMutablePointer<fuse_file_info>?, fuse_readdir_flags) -> Int32 = { path, buf, filler, _, fi, _ in
    run("readdir") { mv in
        let dir: Inode
        if let fi, fi.pointee.fh != 0 { dir = try mv.vault.attributes(fi.pointee.fh) } else { dir = try mv.vault.resolve(try pathString(path)) }
        guard dir.kind == .directory else { throw FSError(ENOTDIR) }
        var st = stat()
        st.st_mode = S_IFDIR
        _ = filler!(buf, ".", &st, 0, fuse_fill_dir_flags(rawValue: 0))
        _ = filler!(buf, "..", &st, 0, fuse_fill_dir_flags(rawValue: 0))
        for (name, node) in try mv.vault.list(dir.id) {
            st.st_ino = UInt(node.id)
            st.st_mode = typeBits(node.kind)
            if filler!(buf, name, &st, 0, fuse_fill_dir_flags(rawValue: 0)) != 0 { break }
        }
        return 0
    }
}

private let opAccess: @convention(c) (UnsafePointer<CChar>?, Int32) -> Int32 = { path, _ in
    // The kernel checks permissions (default_permissions); this only confirms the node exists.
    run("access") { mv in _ = try mv.vault.resolve(try pathString(path)); return 0 }
}

private let opStatfs: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<statvfs>?) -> Int32 = { _, out in
    run("statfs") { mv in
        var s = try mv.vault.backingStatistics()
        s.f_namemax = UInt(UnlockedVault.maximumNameLength)
        s.f_files = UInt(mv.vault.fileCount)
        out!.pointee = s
        return 0
    }
}

// MARK: Namespace

private let opMkdir: @convention(c) (UnsafePointer<CChar>?, mode_t) -> Int32 = { path, mode in
    run("mkdir") { mv in
        let (parent, name) = try parentAndName(mv, path)
        try mv.vault.makeNode(in: parent, name: name, kind: .directory, permissions: UInt32(mode & 0o7777), caller: caller())
        return 0
    }
}

private let opMknod: @convention(c) (UnsafePointer<CChar>?, mode_t, dev_t) -> Int32 = { path, mode, dev in
    run("mknod") { mv in
        let (parent, name) = try parentAndName(mv, path)
        let kind: Inode.Kind
        switch mode & S_IFMT {
        case S_IFREG, 0: kind = .file
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        default: throw FSError(EINVAL)
        }
        try mv.vault.makeNode(in: parent, name: name, kind: kind, permissions: UInt32(mode & 0o7777), caller: caller(), device: UInt64(dev))
        return 0
    }
}

private let opSymlink: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32 = { target, path in
    run("symlink") { mv in
        let (parent, name) = try parentAndName(mv, path)
        let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(target!).assumingMemoryBound(to: UInt8.self), count: strlen(target!)))
        try mv.vault.makeNode(in: parent, name: name, kind: .symlink, permissions: 0o777, caller: caller(), symlinkTarget: bytes)
        return 0
    }
}

private let opReadlink: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int) -> Int32 = { path, buf, size in
    run("readlink") { mv in
        let target = try mv.vault.readLink(try mv.vault.resolve(try pathString(path)).id)
        let n = min(target.count, size - 1)
        target.withUnsafeBytes { _ = memcpy(buf!, $0.baseAddress!, n) }
        buf![n] = 0
        return 0
    }
}

private let opUnlink: @convention(c) (UnsafePointer<CChar>?) -> Int32 = { path in
    run("unlink") { mv in
        let (parent, name) = try parentAndName(mv, path)
        let node = try mv.vault.lookup(parent, name)
        try mv.vault.unlink(in: parent, name: name)
        if node.linkCount > 1 { mv.invalidateOtherNames(of: node.id, except: []) }
        return 0
    }
}

private let opRmdir: @convention(c) (UnsafePointer<CChar>?) -> Int32 = { path in
    run("rmdir") { mv in
        let (parent, name) = try parentAndName(mv, path)
        try mv.vault.removeDirectory(in: parent, name: name)
        return 0
    }
}

private let opRename: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UInt32) -> Int32 = { from, to, flags in
    run("rename") { mv in
        let mode: RenameMode
        switch flags {
        case 0: mode = .replace
        case 1: mode = .noReplace  // RENAME_NOREPLACE
        case 2: mode = .exchange  // RENAME_EXCHANGE
        default: throw FSError(EINVAL)
        }
        let (p1, n1) = try parentAndName(mv, from)
        let (p2, n2) = try parentAndName(mv, to)
        let replaced = try? mv.vault.lookup(p2, n2)
        try mv.vault.rename(from: p1, name: n1, to: p2, newName: n2, mode: mode)
        if let replaced, mode == .replace, replaced.kind != .directory, replaced.linkCount > 1 {
            mv.invalidateOtherNames(of: replaced.id, except: [try pathString(from), try pathString(to)])
        }
        return 0
    }
}

private let opLink: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32 = { from, to in
    run("link") { mv in
        let node = try mv.vault.resolve(try pathString(from))
        let (parent, name) = try parentAndName(mv, to)
        _ = try mv.vault.link(node.id, into: parent, name: name)
        mv.invalidateOtherNames(of: node.id, except: [try pathString(from), try pathString(to)])
        return 0
    }
}

/// After an attribute change through one name of a hard-linked file, its other names must not keep
/// showing the old attributes.
private func attributesChanged(_ mv: MountedVault, _ id: UInt64, _ path: UnsafePointer<CChar>?) {
    guard let node = try? mv.vault.attributes(id), node.linkCount > 1 else { return }
    mv.invalidateOtherNames(of: id, except: path.flatMap { String(validatingCString: $0) }.map { [$0] } ?? [])
}

private let opChmod: @convention(c) (UnsafePointer<CChar>?, mode_t, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, mode, fi in
    run("chmod") { mv in
        let id = try handle(fi)?.id ?? mv.vault.resolve(try pathString(path)).id
        try mv.vault.setAttributes(id, .init(permissions: UInt32(mode & 0o7777)))
        attributesChanged(mv, id, path)
        return 0
    }
}

private let opChown: @convention(c) (UnsafePointer<CChar>?, uid_t, gid_t, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, uid, gid, fi in
    run("chown") { mv in
        let id = try handle(fi)?.id ?? mv.vault.resolve(try pathString(path)).id
        try mv.vault.setAttributes(id, .init(uid: uid == UInt32.max ? nil : uid, gid: gid == UInt32.max ? nil : gid))
        attributesChanged(mv, id, path)
        return 0
    }
}

private let opUtimens: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<timespec>?, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, ts, fi in
    run("utimens") { mv in
        let id = try handle(fi)?.id ?? mv.vault.resolve(try pathString(path)).id
        let now = nowNanoseconds()
        func value(_ t: timespec) -> Int64? {
            if t.tv_nsec == CFuse_UTIME_OMIT { return nil }
            if t.tv_nsec == CFuse_UTIME_NOW { return now }
            return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
        }
        let change = ts.map { UnlockedVault.AttributeChange(accessTime: value($0[0]), modificationTime: value($0[1])) }
            ?? UnlockedVault.AttributeChange(accessTime: now, modificationTime: now)
        try mv.vault.setAttributes(id, change)
        attributesChanged(mv, id, path)
        return 0
    }
}

private let opTruncate: @convention(c) (UnsafePointer<CChar>?, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, size, fi in
    run("truncate") { mv in
        let node = try handle(fi).map { try mv.vault.attributes($0.id) } ?? (try mv.vault.resolve(try pathString(path)))
        guard node.kind == .file else { throw FSError(node.kind == .directory ? EISDIR : EINVAL) }
        try mv.vault.setSize(node.id, to: Int(size))
        attributesChanged(mv, node.id, path)
        return 0
    }
}

// MARK: Files

private func accessMode(_ flags: Int32) -> (write: Bool, append: Bool, truncate: Bool) {
    let acc = flags & O_ACCMODE
    return (acc == O_WRONLY || acc == O_RDWR, flags & O_APPEND != 0, flags & O_TRUNC != 0)
}

private let opOpen: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, fi in
    run("open") { mv in
        let node = try mv.vault.resolve(try pathString(path))
        let m = accessMode(fi!.pointee.flags)
        let h = try mv.vault.open(node.id, write: m.write, truncate: m.truncate, append: m.append)
        if node.linkCount > 1 {
            // Each name of a hard-linked file has its own kernel inode and page cache under libfuse's
            // high-level API; bypassing the page cache keeps every name's view of the data the same.
            fi!.pointee.direct_io = 1
            h.openedPath = try pathString(path)
        } else {
            // Only this mount changes the vault, so cached pages stay valid across opens.
            fi!.pointee.keep_cache = 1
        }
        store(h, in: fi)
        return 0
    }
}

private let opCreate: @convention(c) (UnsafePointer<CChar>?, mode_t, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { path, mode, fi in
    run("create") { mv in
        let (parent, name) = try parentAndName(mv, path)
        let m = accessMode(fi!.pointee.flags)
        let h = try mv.vault.create(in: parent, name: name, permissions: UInt32(mode & 0o7777), caller: caller())
        let handle = m.append ? try mv.vault.open(h.id, write: true, append: true) : h
        if m.append { mv.vault.release(h) }
        fi!.pointee.keep_cache = 1
        store(handle, in: fi)
        return 0
    }
}

private let opRead: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { _, buf, size, offset, fi in
    run("read") { mv in
        guard let h = handle(fi) else { throw FSError(EBADF) }
        return Int32(try mv.vault.read(h, at: Int(offset), into: UnsafeMutableRawBufferPointer(start: buf, count: size)))
    }
}

private let opWrite: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { _, buf, size, offset, fi in
    run("write") { mv in
        guard let h = handle(fi) else { throw FSError(EBADF) }
        return Int32(try mv.vault.write(h, at: Int(offset), from: UnsafeRawBufferPointer(start: buf, count: size)))
    }
}

private let opFlush: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { _, fi in
    run("flush") { mv in
        guard let h = handle(fi) else { return 0 }
        try mv.vault.flush(h)
        if h.writable, let opened = h.openedPath { mv.invalidateOtherNames(of: h.id, except: [opened]) }
        return 0
    }
}

private let opFsync: @convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { _, _, fi in
    run("fsync") { mv in
        guard let h = handle(fi) else { return 0 }
        try mv.vault.fsync(h)
        return 0
    }
}

private let opRelease: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { _, fi in
    run("release") { mv in
        guard let fi, fi.pointee.fh != 0 else { return 0 }
        let h = Unmanaged<FileHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!).takeRetainedValue()
        fi.pointee.fh = 0
        mv.vault.release(h)
        return 0
    }
}

private let opFsyncdir: @convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<fuse_file_info>?) -> Int32 = { _, _, _ in
    run("fsyncdir") { mv in
        if !mv.readOnly { try mv.vault.commit(durable: true) }
        return 0
    }
}

// MARK: Extended attributes

private let opSetxattr: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int, Int32) -> Int32 = { path, name, value, size, flags in
    run("setxattr") { mv in
        let node = try mv.vault.resolve(try pathString(path))
        let bytes = size == 0 ? [] : Array(UnsafeRawBufferPointer(start: value, count: size))
        try mv.vault.setExtendedAttribute(node.id, name: String(cString: name!), value: bytes,
                                          create: flags & 1 != 0, replace: flags & 2 != 0)  // XATTR_CREATE, XATTR_REPLACE
        return 0
    }
}

private let opGetxattr: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int) -> Int32 = { path, name, value, size in
    run("getxattr") { mv in
        let node = try mv.vault.resolve(try pathString(path))
        let v = try mv.vault.extendedAttribute(node.id, name: String(cString: name!))
        if size == 0 { return Int32(v.count) }
        guard size >= v.count else { throw FSError(ERANGE) }
        v.withUnsafeBytes { if $0.count > 0 { memcpy(value!, $0.baseAddress!, v.count) } }
        return Int32(v.count)
    }
}

private let opListxattr: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int) -> Int32 = { path, list, size in
    run("listxattr") { mv in
        let node = try mv.vault.resolve(try pathString(path))
        var bytes: [UInt8] = []
        for name in try mv.vault.extendedAttributeNames(node.id) { bytes += Array(name.utf8) + [0] }
        if size == 0 { return Int32(bytes.count) }
        guard size >= bytes.count else { throw FSError(ERANGE) }
        bytes.withUnsafeBytes { if $0.count > 0 { memcpy(list!, $0.baseAddress!, bytes.count) } }
        return Int32(bytes.count)
    }
}

private let opRemovexattr: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32 = { path, name in
    run("removexattr") { mv in
        let node = try mv.vault.resolve(try pathString(path))
        try mv.vault.removeExtendedAttribute(node.id, name: String(cString: name!))
        return 0
    }
}

// MARK: Lifecycle

private let opInit: @convention(c) (UnsafeMutablePointer<fuse_conn_info>?, UnsafeMutablePointer<fuse_config>?) -> UnsafeMutableRawPointer? = { conn, cfg in
    if let cfg {
        cfg.pointee.use_ino = 1
        cfg.pointee.hard_remove = 1  // the engine keeps unlinked open files itself
        cfg.pointee.nullpath_ok = 1
        cfg.pointee.kernel_cache = 1
        cfg.pointee.entry_timeout = 1
        cfg.pointee.attr_timeout = 1
        cfg.pointee.negative_timeout = 1  // only this mount changes the vault, and it invalidates what it changes
    }
    if let conn {
        conn.pointee.max_write = 1 << 20
        conn.pointee.max_read = 1 << 20  // must match the max_read mount option
        conn.pointee.max_readahead = 1 << 20
        conn.pointee.want |= UInt32(FUSE_CAP_ASYNC_READ)
    }
    return CFuse_private_data()
}

private let opDestroy: @convention(c) (UnsafeMutableRawPointer?) -> Void = { data in
    guard let data else { return }
    Unmanaged<MountedVault>.fromOpaque(data).takeUnretainedValue().close()
}

/// The operations table, filled in one place.
func makeOperations() -> fuse_operations {
    var ops = fuse_operations()
    ops.getattr = opGetattr
    ops.readlink = opReadlink
    ops.mknod = opMknod
    ops.mkdir = opMkdir
    ops.unlink = opUnlink
    ops.rmdir = opRmdir
    ops.symlink = opSymlink
    ops.rename = opRename
    ops.link = opLink
    ops.chmod = opChmod
    ops.chown = opChown
    ops.truncate = opTruncate
    ops.open = opOpen
    ops.read = opRead
    ops.write = opWrite
    ops.statfs = opStatfs
    ops.flush = opFlush
    ops.release = opRelease
    ops.fsync = opFsync
    ops.setxattr = opSetxattr
    ops.getxattr = opGetxattr
    ops.listxattr = opListxattr
    ops.removexattr = opRemovexattr
    ops.opendir = opOpendir
    ops.readdir = opReaddir
    ops.fsyncdir = opFsyncdir
    ops.`init` = opInit
    ops.destroy = opDestroy
    ops.access = opAccess
    ops.create = opCreate
    ops.utimens = opUtimens
    return ops
}
