internal import CFuse

// libfuse's low-level API: the kernel names files by inode number, and the index's inode numbers are
// used as they are (the root is 1 in both). So there is no path walk per request, and a hard-linked
// file is one kernel inode with one page cache, whatever name it is opened by.
//
// One small function per operation, in the file of its area (attributes, directories, namespace,
// data, extended attributes, lifecycle), each with a stable C symbol `vaultaire_op_<name>` (for
// probes: scripts/daemon-time.sh), all filled into this one table. Each reaches the vault through the
// request's user data (`serve`), replies exactly once, and never lets a Swift error cross into C.

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
    ops.fallocate = opFallocate
    ops.lseek = opLseek
    if extendedAttributes {
        // Left out, the kernel gets ENOSYS once and then answers every attribute query itself.
        ops.setxattr = opSetxattr
        ops.getxattr = opGetxattr
        ops.listxattr = opListxattr
        ops.removexattr = opRemovexattr
    }
    return ops
}
