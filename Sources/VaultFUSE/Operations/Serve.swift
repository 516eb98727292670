internal import CFuse
import Glibc
import VaultFS

// What every handler uses to reach the vault, the caller and the handles stored in a request.

/// Runs one handler's work: `body` gets the mounted vault from the request's user data; a thrown
/// error becomes the reply (`-errno`), so no Swift error crosses into C.
@inline(__always)
func serve(_ req: FUSERequest, _ operation: String, _ body: (MountedVault) throws -> Void) {
    let mounted = Unmanaged<MountedVault>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
    mounted.touch()
    do { try body(mounted) } catch { fuse_reply_err(req, mounted.errno(for: error, operation)) }
}

/// Replies "done" to an operation that returns nothing.
@inline(__always)
func replyDone(_ req: FUSERequest) { fuse_reply_err(req, 0) }

/// A name from the kernel as a Swift string; names must be UTF-8.
func nameString(_ name: CString) throws -> String {
    guard let name else { throw FSError(EINVAL) }
    guard let s = String(validatingCString: name) else { throw FSError(EILSEQ, "file names must be UTF-8") }
    return s
}

/// The object an open or opendir stored in `fh` (nil if none).
func stored<T: AnyObject>(_ fi: FUSEFileInfo, as _: T.Type) -> Unmanaged<T>? {
    guard let fi, fi.pointee.fh != 0 else { return nil }
    return Unmanaged<T>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!)
}

/// The open file's handle that open or create stored in `fh`.
func fileHandle(_ fi: FUSEFileInfo) throws -> FileHandle {
    guard let handle = stored(fi, as: FileHandle.self) else { throw FSError(EBADF) }
    return handle.takeUnretainedValue()
}

/// The user and group of the process that made the request.
func caller(_ req: FUSERequest) -> Caller {
    let context = fuse_req_ctx(req)!.pointee
    return Caller(uid: context.uid, gid: context.gid)
}

/// The caller's supplementary groups (libfuse reads them from /proc; only asked in rare cases).
func supplementaryGroups(_ req: FUSERequest) -> [gid_t] {
    var groups = [gid_t](repeating: 0, count: 64)
    var n = fuse_req_getgroups(req, Int32(groups.count), &groups)
    if n > Int32(groups.count) {  // more than fit: ask again with room for all
        groups = [gid_t](repeating: 0, count: Int(n))
        n = fuse_req_getgroups(req, n, &groups)
    }
    return Array(groups.prefix(Int(max(0, n))))
}
