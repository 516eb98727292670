internal import CFuse
import Glibc
import VaultFS

// Extended attributes (left out of the table with --no-xattrs).

/// Replies to a size query (`size` 0) with the length, otherwise with the bytes or ERANGE.
func replySized(_ req: FUSERequest, _ bytes: [UInt8], _ size: Int) throws {
    if size == 0 {
        fuse_reply_xattr(req, bytes.count)
        return
    }
    guard size >= bytes.count else { throw FSError(ERANGE) }
    _ = bytes.withUnsafeBytes { fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count) }
}

@c(vaultaire_op_setxattr)
func opSetxattr(
    _ req: FUSERequest, _ ino: fuse_ino_t, _ name: CString, _ value: CString, _ size: Int,
    _ flags: Int32
) {
    serve(req, "setxattr") { mounted in
        try refuseVirtual(ino)
        let bytes = size == 0 ? [] : Array(UnsafeRawBufferPointer(start: value, count: size))
        // XATTR_CREATE, XATTR_REPLACE
        try mounted.vault.setExtendedAttribute(
            ino, name: try nameString(name), value: bytes,
            create: flags & 1 != 0, replace: flags & 2 != 0)
        replyDone(req)
    }
}

@c(vaultaire_op_getxattr)
func opGetxattr(_ req: FUSERequest, _ ino: fuse_ino_t, _ name: CString, _ size: Int) {
    serve(req, "getxattr") { mounted in
        if ThumbnailRepository.isVirtual(ino) { throw FSError(ENODATA) }
        try replySized(req, try mounted.vault.extendedAttribute(ino, name: try nameString(name)), size)
    }
}

@c(vaultaire_op_listxattr)
func opListxattr(_ req: FUSERequest, _ ino: fuse_ino_t, _ size: Int) {
    serve(req, "listxattr") { mounted in
        if ThumbnailRepository.isVirtual(ino) { return try replySized(req, [], size) }
        try replySized(req, try mounted.vault.extendedAttributeNames(ino).flatMap { Array($0.utf8) + [0] }, size)
    }
}

@c(vaultaire_op_removexattr)
func opRemovexattr(_ req: FUSERequest, _ ino: fuse_ino_t, _ name: CString) {
    serve(req, "removexattr") { mounted in
        try refuseVirtual(ino)
        try mounted.vault.removeExtendedAttribute(ino, name: try nameString(name))
        replyDone(req)
    }
}
