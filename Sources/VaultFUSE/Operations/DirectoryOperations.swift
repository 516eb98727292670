internal import CFuse
import Glibc
import VaultFS

// Open, read, close and sync directories.

@c(vaultaire_op_opendir)
func opOpendir(_ req: FUSERequest, _ ino: fuse_ino_t, _ fi: FUSEFileInfo) {
    serve(req, "opendir") { mounted in
        guard try mounted.node(ino).kind == .directory else { throw FSError(ENOTDIR) }
        let directory = Unmanaged.passRetained(DirectoryHandle(id: ino))
        fi!.pointee.fh = UInt64(UInt(bitPattern: directory.toOpaque()))
        if fuse_reply_open(req, fi) != 0 { directory.release() }
    }
}

@c(vaultaire_op_readdir)
func opReaddir(_ req: FUSERequest, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, _ fi: FUSEFileInfo) {
    serve(req, "readdir") { mounted in try readDirectory(req, size, offset, fi, plus: false, mounted) }
}

@c(vaultaire_op_readdirplus)
func opReaddirplus(_ req: FUSERequest, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, _ fi: FUSEFileInfo) {
    serve(req, "readdirplus") { mounted in try readDirectory(req, size, offset, fi, plus: true, mounted) }
}

@c(vaultaire_op_releasedir)
func opReleasedir(_ req: FUSERequest, _ ino: fuse_ino_t, _ fi: FUSEFileInfo) {
    if let directory = stored(fi, as: DirectoryHandle.self) {
        directory.release()
        fi!.pointee.fh = 0
    }
    replyDone(req)
}

@c(vaultaire_op_fsyncdir)
func opFsyncdir(_ req: FUSERequest, _ ino: fuse_ino_t, _ dataOnly: Int32, _ fi: FUSEFileInfo) {
    serve(req, "fsyncdir") { mounted in
        if !mounted.readOnly { try mounted.vault.commit(durable: true) }
        replyDone(req)
    }
}
