internal import CFuse
import Glibc
import VaultFS
import VaultFormat

// Names: make, link, rename and remove them; symbolic links.

@c(vaultaire_op_mkdir)
func opMkdir(_ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString, _ mode: mode_t) {
    serve(req, "mkdir") { mounted in
        try refuseVirtual(parent)
        replyEntry(
            req,
            try mounted.vault.makeNode(
                in: parent, name: try nameString(name), kind: .directory,
                permissions: UInt32(mode & 0o7777), caller: caller(req)), mounted)
    }
}

@c(vaultaire_op_mknod)
func opMknod(_ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString, _ mode: mode_t, _ dev: dev_t) {
    serve(req, "mknod") { mounted in
        try refuseVirtual(parent)
        let kind: Inode.Kind
        switch mode & S_IFMT {
        case S_IFREG, 0: kind = .file
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        default: throw FSError(EINVAL)
        }
        replyEntry(
            req,
            try mounted.vault.makeNode(
                in: parent, name: try nameString(name), kind: kind,
                permissions: UInt32(mode & 0o7777), caller: caller(req),
                device: UInt64(dev)), mounted)
    }
}

@c(vaultaire_op_symlink)
func opSymlink(_ req: FUSERequest, _ target: CString, _ parent: fuse_ino_t, _ name: CString) {
    serve(req, "symlink") { mounted in
        try refuseVirtual(parent)
        let bytes = Array(UnsafeRawBufferPointer(start: target!, count: strlen(target!)))
        replyEntry(
            req,
            try mounted.vault.makeNode(
                in: parent, name: try nameString(name), kind: .symlink,
                permissions: 0o777, caller: caller(req),
                symlinkTarget: bytes), mounted)
    }
}

@c(vaultaire_op_readlink)
func opReadlink(_ req: FUSERequest, _ ino: fuse_ino_t) {
    serve(req, "readlink") { mounted in
        if ThumbnailRepository.isVirtual(ino) { throw FSError(EINVAL) }
        var target = try mounted.vault.readLink(ino)
        target.append(0)
        target.withUnsafeBytes { _ = fuse_reply_readlink(req, $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }
}

@c(vaultaire_op_unlink)
func opUnlink(_ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString) {
    serve(req, "unlink") { mounted in
        try mounted.refuseRepository(parent, try nameString(name))
        try mounted.vault.unlink(in: parent, name: try nameString(name))
        replyDone(req)
    }
}

@c(vaultaire_op_rmdir)
func opRmdir(_ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString) {
    serve(req, "rmdir") { mounted in
        try mounted.refuseRepository(parent, try nameString(name))
        try mounted.vault.removeDirectory(in: parent, name: try nameString(name))
        replyDone(req)
    }
}

@c(vaultaire_op_rename)
func opRename(
    _ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString, _ newParent: fuse_ino_t,
    _ newName: CString, _ flags: UInt32
) {
    serve(req, "rename") { mounted in
        try mounted.refuseRepository(parent, try nameString(name))
        try refuseVirtual(newParent)
        let mode: RenameMode
        switch flags {
        case 0: mode = .replace
        case 1: mode = .noReplace  // RENAME_NOREPLACE
        case 2: mode = .exchange  // RENAME_EXCHANGE
        default: throw FSError(EINVAL)
        }
        try mounted.vault.rename(
            from: parent, name: try nameString(name), to: newParent,
            newName: try nameString(newName), mode: mode)
        replyDone(req)
    }
}

@c(vaultaire_op_link)
func opLink(_ req: FUSERequest, _ ino: fuse_ino_t, _ newParent: fuse_ino_t, _ newName: CString) {
    serve(req, "link") { mounted in
        try refuseVirtual(ino, newParent)
        replyEntry(req, try mounted.vault.link(ino, into: newParent, name: try nameString(newName)), mounted)
    }
}
