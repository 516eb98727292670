internal import CFuse
import Glibc
import VaultFS

// Open files: open, create, read, write, flush, fsync, release.

/// What an open's flags ask for.
func accessMode(_ flags: Int32) -> (write: Bool, append: Bool, truncate: Bool) {
    let accessBits = flags & O_ACCMODE
    return (accessBits == O_WRONLY || accessBits == O_RDWR, flags & O_APPEND != 0, flags & O_TRUNC != 0)
}

/// Hands a file handle to the kernel; if the open was interrupted meanwhile, closes it again.
func replyOpened(
    _ req: FUSERequest, _ handle: FileHandle, _ fi: UnsafeMutablePointer<fuse_file_info>,
    _ mounted: MountedVault, entry: fuse_entry_param? = nil
) {
    // Only this mount changes the vault, so cached pages stay valid across opens.
    fi.pointee.keep_cache = 1
    let retained = Unmanaged.passRetained(handle)
    fi.pointee.fh = UInt64(UInt(bitPattern: retained.toOpaque()))
    let status: Int32
    if var entry { status = fuse_reply_create(req, &entry, fi) } else { status = fuse_reply_open(req, fi) }
    if status != 0 {
        retained.release()
        mounted.vault.release(handle)
    }
}

@c(vaultaire_op_open)
func opOpen(_ req: FUSERequest, _ ino: fuse_ino_t, _ fi: FUSEFileInfo) {
    let killsSetID = requestKillsSetID()
    serve(req, "open") { mounted in
        let access = accessMode(fi!.pointee.flags)
        if ThumbnailRepository.isVirtual(ino) { return try openVirtual(req, ino, fi!, write: access.write, mounted) }
        try dropSetIDBits(ifAsked: killsSetID, req, ino, mounted)  // open with O_TRUNC
        // With the kernel's write-back cache, the kernel places appends itself and sends their offsets.
        let handle = try mounted.vault.open(
            ino, write: access.write, truncate: access.truncate,
            append: access.append && !mounted.writebackCache)
        replyOpened(req, handle, fi!, mounted)
    }
}

@c(vaultaire_op_create)
func opCreate(_ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString, _ mode: mode_t, _ fi: FUSEFileInfo) {
    serve(req, "create") { mounted in
        try refuseVirtual(parent)
        let access = accessMode(fi!.pointee.flags)
        let created = try mounted.vault.create(
            in: parent, name: try nameString(name),
            permissions: UInt32(mode & 0o7777), caller: caller(req))
        var handle = created
        do {
            if access.append && !mounted.writebackCache {
                handle = try mounted.vault.open(created.id, write: true, append: true)
                mounted.vault.release(created)
            }
            replyOpened(
                req, handle, fi!, mounted,
                entry: entryParameters(for: try mounted.vault.attributes(handle.id), mounted))
        } catch {
            mounted.vault.release(handle)
            throw error
        }
    }
}

@c(vaultaire_op_read)
func opRead(_ req: FUSERequest, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, _ fi: FUSEFileInfo) {
    serve(req, "read") { mounted in
        if ThumbnailRepository.isVirtual(ino) { return try readVirtual(req, size, offset, fi) }
        let handle = try fileHandle(fi)
        try ReplyBuffers.withBuffer(size: size) { buffer in
            let n =
                SplitRead.wanted(size: size)
                ? try SplitRead.read(mounted.vault, handle, at: Int(offset), into: buffer)
                : try mounted.vault.read(handle, at: Int(offset), into: buffer)
            fuse_reply_buf(req, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), n)
        }
    }
}

@c(vaultaire_op_write)
func opWrite(
    _ req: FUSERequest, _ ino: fuse_ino_t, _ buf: CString, _ size: Int, _ offset: off_t,
    _ fi: FUSEFileInfo
) {
    let killsSetID = requestKillsSetID()
    serve(req, "write") { mounted in
        try refuseVirtual(ino)
        try dropSetIDBits(ifAsked: killsSetID, req, ino, mounted)
        let data = UnsafeRawBufferPointer(start: buf, count: size)
        let n = try mounted.vault.write(try fileHandle(fi), at: Int(offset), from: data)
        fuse_reply_write(req, n)
    }
}

@c(vaultaire_op_flush)
func opFlush(_ req: FUSERequest, _ ino: fuse_ino_t, _ fi: FUSEFileInfo) {
    serve(req, "flush") { mounted in
        if ThumbnailRepository.isVirtual(ino) { return replyDone(req) }
        try mounted.vault.flush(try fileHandle(fi))
        replyDone(req)
    }
}

@c(vaultaire_op_fsync)
func opFsync(_ req: FUSERequest, _ ino: fuse_ino_t, _ dataOnly: Int32, _ fi: FUSEFileInfo) {
    serve(req, "fsync") { mounted in
        if ThumbnailRepository.isVirtual(ino) { return replyDone(req) }
        try mounted.vault.fsync(try fileHandle(fi))
        replyDone(req)
    }
}

@c(vaultaire_op_release)
func opRelease(_ req: FUSERequest, _ ino: fuse_ino_t, _ fi: FUSEFileInfo) {
    serve(req, "release") { mounted in
        if ThumbnailRepository.isVirtual(ino) {
            if let handle = stored(fi, as: VirtualFileHandle.self) {
                fi!.pointee.fh = 0
                handle.release()
            }
            return replyDone(req)
        }
        if let handle = stored(fi, as: FileHandle.self) {
            fi!.pointee.fh = 0
            mounted.vault.release(handle.takeRetainedValue())
        }
        replyDone(req)
    }
}

// linux/falloc.h and unistd.h's values, which the Glibc module leaves out (they sit behind _GNU_SOURCE).
private let fallocKeepSize: Int32 = 0x01
private let fallocPunchHole: Int32 = 0x02
private let seekData: Int32 = 3
private let seekHole: Int32 = 4

@c(vaultaire_op_fallocate)
func opFallocate(
    _ req: FUSERequest, _ ino: fuse_ino_t, _ mode: Int32, _ offset: off_t, _ length: off_t, _ fi: FUSEFileInfo
) {
    serve(req, "fallocate") { mounted in
        try refuseVirtual(ino)
        let allocation: UnlockedVault.Allocation
        switch mode {
        case 0: allocation = .reserve(keepSize: false)
        case fallocKeepSize: allocation = .reserve(keepSize: true)
        case fallocKeepSize | fallocPunchHole: allocation = .punchHole
        default: throw FSError(EOPNOTSUPP)  // ZERO_RANGE, COLLAPSE_RANGE, INSERT_RANGE …
        }
        try mounted.vault.allocate(try fileHandle(fi), allocation, offset: Int(offset), length: Int(length))
        replyDone(req)
    }
}

@c(vaultaire_op_lseek)
func opLseek(_ req: FUSERequest, _ ino: fuse_ino_t, _ offset: off_t, _ whence: Int32, _ fi: FUSEFileInfo) {
    serve(req, "lseek") { mounted in
        // The kernel asks only for these two; a thumbnail is all data.
        guard whence == seekData || whence == seekHole else { throw FSError(EINVAL) }
        if ThumbnailRepository.isVirtual(ino) { throw FSError(EOPNOTSUPP) }
        let position = try mounted.vault.seek(try fileHandle(fi), from: Int(offset), toData: whence == seekData)
        fuse_reply_lseek(req, off_t(position))
    }
}
