internal import CFuse
internal import CFuseWire
import Glibc
import VaultFS
import VaultFormat
import VaultSystem

// libfuse's low-level API: the kernel names files by inode number, and the index's inode numbers are
// used as they are (the root is 1 in both). So there is no path walk per request, and a hard-linked
// file is one kernel inode with one page cache, whatever name it is opened by.
//
// One small function per operation, all filled into a single table by `makeOperations()`. Each
// reaches the vault through the request's user data, replies exactly once, and never lets a Swift
// error cross into C.

@inline(__always)
private func serve(_ req: fuse_req_t?, _ operation: String, _ body: (MountedVault) throws -> Void) {
    let mv = Unmanaged<MountedVault>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
    mv.touch()
    do { try body(mv) } catch { fuse_reply_err(req, mv.errno(for: error, operation)) }
}

/// Replies "done" to an operation that returns nothing.
@inline(__always)
private func ok(_ req: fuse_req_t?) { fuse_reply_err(req, 0) }

private func nameString(_ name: UnsafePointer<CChar>?) throws -> String {
    guard let name else { throw FSError(EINVAL) }
    guard let s = String(validatingCString: name) else { throw FSError(EILSEQ, "file names must be UTF-8") }
    return s
}

/// The object an open or opendir stored in `fh` (nil if none).
private func stored<T: AnyObject>(_ fi: UnsafeMutablePointer<fuse_file_info>?, as _: T.Type) -> Unmanaged<T>? {
    guard let fi, fi.pointee.fh != 0 else { return nil }
    return Unmanaged<T>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!)
}

private func handle(_ fi: UnsafeMutablePointer<fuse_file_info>?) throws -> FileHandle {
    guard let h = stored(fi, as: FileHandle.self) else { throw FSError(EBADF) }
    return h.takeUnretainedValue()
}

private func caller(_ req: fuse_req_t?) -> Caller {
    let ctx = fuse_req_ctx(req)!.pointee
    return Caller(uid: ctx.uid, gid: ctx.gid)
}

/// Clears set-ID bits when the request asks for it: with FUSE_HANDLE_KILLPRIV_V2 (negotiated in
/// CFuseWire) the kernel leaves that to the filesystem on write, truncate and chown. A write or open
/// reply carries no attributes, so the kernel is told to drop the mode it has cached. Returns whether
/// the mode changed.
@discardableResult
private func dropSetIDBitsIfAsked(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ mv: MountedVault, replyCarriesAttributes: Bool = false) throws -> Bool {
    guard vaultaire_wire_request_kills_setid() != 0 else { return false }
    let who = caller(req)
    let changed = try mv.vault.dropSetIDBits(ino) { gid in
        who.uid == 0 || who.gid == gid || supplementaryGroups(req).contains(gid)
    }
    if changed, !replyCarriesAttributes, let session = mv.session {
        _ = fuse_lowlevel_notify_inval_inode(session, ino, -1, 0)  // negative offset: attributes only
    }
    return changed
}

/// The caller's supplementary groups (libfuse reads them from /proc; only asked in rare cases).
private func supplementaryGroups(_ req: fuse_req_t?) -> [gid_t] {
    var groups = [gid_t](repeating: 0, count: 64)
    var n = fuse_req_getgroups(req, Int32(groups.count), &groups)
    if n > Int32(groups.count) {  // more than fit: ask again with room for all
        groups = [gid_t](repeating: 0, count: Int(n))
        n = fuse_req_getgroups(req, n, &groups)
    }
    return Array(groups.prefix(Int(max(0, n))))
}

private func timespecFrom(_ ns: Int64) -> timespec {
    var sec = ns / 1_000_000_000, nsec = ns % 1_000_000_000
    if nsec < 0 { sec -= 1; nsec += 1_000_000_000 }
    return timespec(tv_sec: Int(sec), tv_nsec: Int(nsec))
}

private func nanoseconds(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }

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

private func attributes(of n: Inode, _ mv: MountedVault) -> stat {
    var st = stat()
    st.st_ino = UInt(n.id)
    st.st_mode = typeBits(n.kind) | mode_t(n.permissions)
    st.st_nlink = UInt(n.linkCount)
    st.st_uid = n.uid
    st.st_gid = n.gid
    st.st_rdev = UInt(n.deviceNumber)
    st.st_size = n.kind == .directory ? 4096 : Int(n.size)
    st.st_blksize = mv.preferredBlockSize
    st.st_blocks = (Int(n.size) + 511) / 512
    st.st_atim = timespecFrom(n.accessTime)
    st.st_mtim = timespecFrom(n.modificationTime)
    st.st_ctim = timespecFrom(n.changeTime)
    return st
}

private func entry(for n: Inode, _ mv: MountedVault) -> fuse_entry_param {
    var e = fuse_entry_param()
    e.ino = n.id
    e.generation = 0  // inode numbers are never reused within a vault
    e.attr = attributes(of: n, mv)
    e.attr_timeout = MountedVault.cacheSeconds
    e.entry_timeout = MountedVault.cacheSeconds
    return e
}

private func replyEntry(_ req: fuse_req_t?, _ n: Inode, _ mv: MountedVault) {
    var e = entry(for: n, mv)
    fuse_reply_entry(req, &e)
}

// MARK: Attributes and lookups

private let opLookup: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?) -> Void = { req, parent, name in
    serve(req, "lookup") { mv in
        do {
            replyEntry(req, try mv.vault.lookup(parent, try nameString(name)), mv)
        } catch let e as FSError where e.errno == ENOENT {
            // A negative entry: the kernel remembers "no such name" (only this mount changes the vault).
            var negative = fuse_entry_param()
            negative.entry_timeout = MountedVault.cacheSeconds
            fuse_reply_entry(req, &negative)
        }
    }
}

// The engine keeps every inode of the index in memory, so the kernel's lookup counts need no tracking.
private let opForget: @convention(c) (fuse_req_t?, fuse_ino_t, UInt64) -> Void = { req, _, _ in fuse_reply_none(req) }
private let opForgetMulti: @convention(c) (fuse_req_t?, Int, UnsafeMutablePointer<fuse_forget_data>?) -> Void = { req, _, _ in
    fuse_reply_none(req)
}

private let opGetattr: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, ino, _ in
    serve(req, "getattr") { mv in
        var st = attributes(of: try mv.vault.attributes(ino), mv)
        fuse_reply_attr(req, &st, MountedVault.cacheSeconds)
    }
}

/// chmod, chown, truncate and utimens arrive as one request.
private let opSetattr: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<stat>?, Int32, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, ino, attr, toSet, _ in
    serve(req, "setattr") { mv in
        let a = attr!.pointee
        func has(_ flag: Int32) -> Bool { toSet & flag != 0 }
        if has(FUSE_SET_ATTR_SIZE) {
            let node = try mv.vault.attributes(ino)
            guard node.kind == .file else { throw FSError(node.kind == .directory ? EISDIR : EINVAL) }
            try mv.vault.setSize(ino, to: Int(a.st_size))
        }
        let now = nowNanoseconds()
        var change = UnlockedVault.AttributeChange()
        if has(FUSE_SET_ATTR_MODE) { change.permissions = UInt32(a.st_mode & 0o7777) }
        if has(FUSE_SET_ATTR_UID) { change.uid = a.st_uid }
        if has(FUSE_SET_ATTR_GID) { change.gid = a.st_gid }
        if has(FUSE_SET_ATTR_ATIME) { change.accessTime = has(FUSE_SET_ATTR_ATIME_NOW) ? now : nanoseconds(a.st_atim) }
        if has(FUSE_SET_ATTR_MTIME) { change.modificationTime = has(FUSE_SET_ATTR_MTIME_NOW) ? now : nanoseconds(a.st_mtim) }
        let changesMetadata = toSet & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME) != 0
        var node = changesMetadata ? try mv.vault.setAttributes(ino, change) : try mv.vault.attributes(ino)
        if try dropSetIDBitsIfAsked(req, ino, mv, replyCarriesAttributes: true) { node = try mv.vault.attributes(ino) }
        var st = attributes(of: node, mv)
        fuse_reply_attr(req, &st, MountedVault.cacheSeconds)
    }
}

private let opStatfs: @convention(c) (fuse_req_t?, fuse_ino_t) -> Void = { req, _ in
    serve(req, "statfs") { mv in
        var s = try mv.vault.backingStatistics()
        s.f_namemax = UInt(UnlockedVault.maximumNameLength)
        s.f_files = UInt(mv.vault.fileCount)
        fuse_reply_statfs(req, &s)
    }
}

// MARK: Directories

/// An open directory: its entries as of the last read from the start (rewinddir sees changes).
private final class DirectoryHandle {
    let id: UInt64
    var entries: [(name: String, id: UInt64)] = []
    init(id: UInt64) { self.id = id }
}

private func directoryHandle(_ fi: UnsafeMutablePointer<fuse_file_info>?) throws -> DirectoryHandle {
    guard let d = stored(fi, as: DirectoryHandle.self) else { throw FSError(EBADF) }
    return d.takeUnretainedValue()
}

private let opOpendir: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, ino, fi in
    serve(req, "opendir") { mv in
        guard try mv.vault.attributes(ino).kind == .directory else { throw FSError(ENOTDIR) }
        let dir = Unmanaged.passRetained(DirectoryHandle(id: ino))
        fi!.pointee.fh = UInt64(UInt(bitPattern: dir.toOpaque()))
        if fuse_reply_open(req, fi) != 0 { dir.release() }
    }
}

/// Fills one reply buffer of at most `size` bytes with entries from position `offset` on; positions
/// 0 and 1 are "." and "..", the others the directory's names. With `plus`, each entry carries its
/// attributes, so `ls -l` and `find` need no lookup per name.
private func readDirectory(_ req: fuse_req_t?, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?,
                           plus: Bool, _ mv: MountedVault) throws {
    let dir = try directoryHandle(fi)
    if offset == 0 { dir.entries = try mv.vault.list(dir.id).map { ($0.name, $0.inode.id) } }
    let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
    defer { buffer.deallocate() }
    var used = 0
    var position = Int(offset)
    while position < dir.entries.count + 2 {
        let name: String, id: UInt64
        var e = fuse_entry_param()
        if position < 2 {
            name = position == 0 ? "." : ".."
            id = dir.id
            e.attr.st_ino = UInt(id)
            e.attr.st_mode = S_IFDIR  // ino 0: the kernel links no inode for "." and ".."
        } else {
            (name, id) = dir.entries[position - 2]
            guard let node = try? mv.vault.attributes(id) else { position += 1; continue }  // removed since
            if plus { e = entry(for: node, mv) } else { e.attr.st_ino = UInt(id); e.attr.st_mode = typeBits(node.kind) }
        }
        let added = name.withCString { cName in
            plus ? fuse_add_direntry_plus(req, buffer + used, size - used, cName, &e, off_t(position + 1))
                 : fuse_add_direntry(req, buffer + used, size - used, cName, &e.attr, off_t(position + 1))
        }
        if added > size - used { break }
        used += added
        position += 1
    }
    fuse_reply_buf(req, buffer, used)
}

private let opReaddir: @convention(c) (fuse_req_t?, fuse_ino_t, Int, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, size, offset, fi in
    serve(req, "readdir") { mv in try readDirectory(req, size, offset, fi, plus: false, mv) }
}

private let opReaddirplus: @convention(c) (fuse_req_t?, fuse_ino_t, Int, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, size, offset, fi in
    serve(req, "readdirplus") { mv in try readDirectory(req, size, offset, fi, plus: true, mv) }
}

private let opReleasedir: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, fi in
    if let d = stored(fi, as: DirectoryHandle.self) {
        d.release()
        fi!.pointee.fh = 0
    }
    ok(req)
}

private let opFsyncdir: @convention(c) (fuse_req_t?, fuse_ino_t, Int32, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, _, _ in
    serve(req, "fsyncdir") { mv in
        if !mv.readOnly { try mv.vault.commit(durable: true) }
        ok(req)
    }
}

// MARK: Namespace

private let opMkdir: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, mode_t) -> Void = { req, parent, name, mode in
    serve(req, "mkdir") { mv in
        replyEntry(req, try mv.vault.makeNode(in: parent, name: try nameString(name), kind: .directory,
                                              permissions: UInt32(mode & 0o7777), caller: caller(req)), mv)
    }
}

private let opMknod: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, mode_t, dev_t) -> Void = { req, parent, name, mode, dev in
    serve(req, "mknod") { mv in
        let kind: Inode.Kind
        switch mode & S_IFMT {
        case S_IFREG, 0: kind = .file
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        default: throw FSError(EINVAL)
        }
        replyEntry(req, try mv.vault.makeNode(in: parent, name: try nameString(name), kind: kind, permissions: UInt32(mode & 0o7777),
                                              caller: caller(req), device: UInt64(dev)), mv)
    }
}

private let opSymlink: @convention(c) (fuse_req_t?, UnsafePointer<CChar>?, fuse_ino_t, UnsafePointer<CChar>?) -> Void = { req, target, parent, name in
    serve(req, "symlink") { mv in
        let bytes = Array(UnsafeRawBufferPointer(start: target!, count: strlen(target!)))
        replyEntry(req, try mv.vault.makeNode(in: parent, name: try nameString(name), kind: .symlink, permissions: 0o777,
                                              caller: caller(req), symlinkTarget: bytes), mv)
    }
}

private let opReadlink: @convention(c) (fuse_req_t?, fuse_ino_t) -> Void = { req, ino in
    serve(req, "readlink") { mv in
        var target = try mv.vault.readLink(ino)
        target.append(0)
        target.withUnsafeBytes { _ = fuse_reply_readlink(req, $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }
}

private let opUnlink: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?) -> Void = { req, parent, name in
    serve(req, "unlink") { mv in
        try mv.vault.unlink(in: parent, name: try nameString(name))
        ok(req)
    }
}

private let opRmdir: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?) -> Void = { req, parent, name in
    serve(req, "rmdir") { mv in
        try mv.vault.removeDirectory(in: parent, name: try nameString(name))
        ok(req)
    }
}

private let opRename: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, fuse_ino_t, UnsafePointer<CChar>?, UInt32) -> Void = { req, parent, name, newParent, newName, flags in
    serve(req, "rename") { mv in
        let mode: RenameMode
        switch flags {
        case 0: mode = .replace
        case 1: mode = .noReplace  // RENAME_NOREPLACE
        case 2: mode = .exchange  // RENAME_EXCHANGE
        default: throw FSError(EINVAL)
        }
        try mv.vault.rename(from: parent, name: try nameString(name), to: newParent, newName: try nameString(newName), mode: mode)
        ok(req)
    }
}

private let opLink: @convention(c) (fuse_req_t?, fuse_ino_t, fuse_ino_t, UnsafePointer<CChar>?) -> Void = { req, ino, newParent, newName in
    serve(req, "link") { mv in
        replyEntry(req, try mv.vault.link(ino, into: newParent, name: try nameString(newName)), mv)
    }
}

// MARK: Files

private func accessMode(_ flags: Int32) -> (write: Bool, append: Bool, truncate: Bool) {
    let acc = flags & O_ACCMODE
    return (acc == O_WRONLY || acc == O_RDWR, flags & O_APPEND != 0, flags & O_TRUNC != 0)
}

/// Hands a file handle to the kernel; if the open was interrupted meanwhile, closes it again.
private func replyOpened(_ req: fuse_req_t?, _ h: FileHandle, _ fi: UnsafeMutablePointer<fuse_file_info>, _ mv: MountedVault,
                         entry: fuse_entry_param? = nil) {
    // Only this mount changes the vault, so cached pages stay valid across opens.
    fi.pointee.keep_cache = 1
    let retained = Unmanaged.passRetained(h)
    fi.pointee.fh = UInt64(UInt(bitPattern: retained.toOpaque()))
    let status: Int32
    if var e = entry { status = fuse_reply_create(req, &e, fi) } else { status = fuse_reply_open(req, fi) }
    if status != 0 {
        retained.release()
        mv.vault.release(h)
    }
}

private let opOpen: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, ino, fi in
    serve(req, "open") { mv in
        let m = accessMode(fi!.pointee.flags)
        try dropSetIDBitsIfAsked(req, ino, mv)  // open with O_TRUNC
        // With the kernel's write-back cache, the kernel places appends itself and sends their offsets.
        let h = try mv.vault.open(ino, write: m.write, truncate: m.truncate, append: m.append && !mv.writebackCache)
        replyOpened(req, h, fi!, mv)
    }
}

private let opCreate: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, mode_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, parent, name, mode, fi in
    serve(req, "create") { mv in
        let m = accessMode(fi!.pointee.flags)
        let created = try mv.vault.create(in: parent, name: try nameString(name), permissions: UInt32(mode & 0o7777), caller: caller(req))
        var h = created
        do {
            if m.append && !mv.writebackCache {
                h = try mv.vault.open(created.id, write: true, append: true)
                mv.vault.release(created)
            }
            replyOpened(req, h, fi!, mv, entry: entry(for: try mv.vault.attributes(h.id), mv))
        } catch {
            mv.vault.release(h)
            throw error
        }
    }
}

private let opRead: @convention(c) (fuse_req_t?, fuse_ino_t, Int, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, size, offset, fi in
    serve(req, "read") { mv in
        let h = try handle(fi)
        try ReplyBuffers.withBuffer(size: size) { buffer in
            let n = SplitRead.wanted(size: size) ? try SplitRead.read(mv.vault, h, at: Int(offset), into: buffer)
                : try mv.vault.read(h, at: Int(offset), into: buffer)
            fuse_reply_buf(req, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), n)
        }
    }
}

private let opWrite: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, Int, off_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, ino, buf, size, offset, fi in
    serve(req, "write") { mv in
        try dropSetIDBitsIfAsked(req, ino, mv)
        let n = try mv.vault.write(try handle(fi), at: Int(offset), from: UnsafeRawBufferPointer(start: buf, count: size))
        fuse_reply_write(req, n)
    }
}

private let opFlush: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, fi in
    serve(req, "flush") { mv in
        try mv.vault.flush(try handle(fi))
        ok(req)
    }
}

private let opFsync: @convention(c) (fuse_req_t?, fuse_ino_t, Int32, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, _, fi in
    serve(req, "fsync") { mv in
        try mv.vault.fsync(try handle(fi))
        ok(req)
    }
}

private let opRelease: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafeMutablePointer<fuse_file_info>?) -> Void = { req, _, fi in
    serve(req, "release") { mv in
        if let h = stored(fi, as: FileHandle.self) {
            fi!.pointee.fh = 0
            mv.vault.release(h.takeRetainedValue())
        }
        ok(req)
    }
}

// MARK: Extended attributes

/// Replies to a size query (`size` 0) with the length, otherwise with the bytes or ERANGE.
private func replySized(_ req: fuse_req_t?, _ bytes: [UInt8], _ size: Int) throws {
    if size == 0 { fuse_reply_xattr(req, bytes.count); return }
    guard size >= bytes.count else { throw FSError(ERANGE) }
    _ = bytes.withUnsafeBytes { fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count) }
}

private let opSetxattr: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int, Int32) -> Void = { req, ino, name, value, size, flags in
    serve(req, "setxattr") { mv in
        let bytes = size == 0 ? [] : Array(UnsafeRawBufferPointer(start: value, count: size))
        try mv.vault.setExtendedAttribute(ino, name: try nameString(name), value: bytes,
                                          create: flags & 1 != 0, replace: flags & 2 != 0)  // XATTR_CREATE, XATTR_REPLACE
        ok(req)
    }
}

private let opGetxattr: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?, Int) -> Void = { req, ino, name, size in
    serve(req, "getxattr") { mv in try replySized(req, try mv.vault.extendedAttribute(ino, name: try nameString(name)), size) }
}

private let opListxattr: @convention(c) (fuse_req_t?, fuse_ino_t, Int) -> Void = { req, ino, size in
    serve(req, "listxattr") { mv in
        try replySized(req, try mv.vault.extendedAttributeNames(ino).flatMap { Array($0.utf8) + [0] }, size)
    }
}

private let opRemovexattr: @convention(c) (fuse_req_t?, fuse_ino_t, UnsafePointer<CChar>?) -> Void = { req, ino, name in
    serve(req, "removexattr") { mv in
        try mv.vault.removeExtendedAttribute(ino, name: try nameString(name))
        ok(req)
    }
}

// MARK: Lifecycle

private let opInit: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<fuse_conn_info>?) -> Void = { data, conn in
    guard let data, let conn else { return }
    let mv = Unmanaged<MountedVault>.fromOpaque(data).takeUnretainedValue()
    conn.pointee.max_write = 1 << 20
    conn.pointee.max_read = UInt32(ReplyBuffers.capacity)  // must match the max_read mount option
    conn.pointee.max_readahead = 1 << 20
    // The kernel's write-back sends WRITEs in the background, at most `max_background` (12 by
    // default) at a time; with more in flight the daemon's threads seal and write without waiting
    // on one another's turn (measured: a 1 GiB sequential write gains 5–7 %).
    conn.pointee.max_background = 64
    conn.pointee.congestion_threshold = 48
    conn.pointee.want |= UInt32(FUSE_CAP_ASYNC_READ)
    // Without FUSE_HANDLE_KILLPRIV_V2 (see CFuseWire) the kernel clears set-ID bits itself.
    conn.pointee.want &= ~UInt32(FUSE_CAP_HANDLE_KILLPRIV)
    // The kernel's write-back cache gathers small writes into large ones; it owns file sizes and
    // modification times while it holds dirty pages, which is safe because only this mount writes.
    if !mv.readOnly, conn.pointee.capable & UInt32(FUSE_CAP_WRITEBACK_CACHE) != 0 {
        conn.pointee.want |= UInt32(FUSE_CAP_WRITEBACK_CACHE)
        mv.writebackCache = true
    }
}

private let opDestroy: @convention(c) (UnsafeMutableRawPointer?) -> Void = { data in
    guard let data else { return }
    Unmanaged<MountedVault>.fromOpaque(data).takeUnretainedValue().close()
}

/// The operations table, filled in one place.
func makeOperations(extendedAttributes: Bool) -> fuse_lowlevel_ops {
    var ops = fuse_lowlevel_ops()
    ops.`init` = opInit
    ops.destroy = opDestroy
    ops.lookup = opLookup
    ops.forget = opForget
    ops.forget_multi = opForgetMulti
    ops.getattr = opGetattr
    ops.setattr = opSetattr
    ops.statfs = opStatfs
    ops.opendir = opOpendir
    ops.readdir = opReaddir
    ops.readdirplus = opReaddirplus
    ops.releasedir = opReleasedir
    ops.fsyncdir = opFsyncdir
    ops.mkdir = opMkdir
    ops.mknod = opMknod
    ops.symlink = opSymlink
    ops.readlink = opReadlink
    ops.unlink = opUnlink
    ops.rmdir = opRmdir
    ops.rename = opRename
    ops.link = opLink
    ops.open = opOpen
    ops.create = opCreate
    ops.read = opRead
    ops.write = opWrite
    ops.flush = opFlush
    ops.fsync = opFsync
    ops.release = opRelease
    if extendedAttributes {
        // Left out, the kernel gets ENOSYS once and then answers every attribute query itself.
        ops.setxattr = opSetxattr
        ops.getxattr = opGetxattr
        ops.listxattr = opListxattr
        ops.removexattr = opRemovexattr
    }
    return ops
}
