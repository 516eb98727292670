internal import CFuse
import Glibc
import VaultFS
import VaultFormat
import VaultSystem

// Lookups, attributes and the file system's statistics.

@c(vaultaire_op_lookup)
func opLookup(_ req: FUSERequest, _ parent: fuse_ino_t, _ name: CString) {
    serve(req, "lookup") { mounted in
        let name = try nameString(name)
        if let repository = mounted.thumbnailRepository {
            if ThumbnailRepository.isVirtual(parent) {
                replyEntry(req, try repository.attributes(try repository.lookup(parent, name)), mounted)
                return
            }
            if name == ThumbnailRepository.directoryName {
                // Appears with the first image and goes with the last: no entry of it is cached.
                if let real = try? mounted.vault.lookup(parent, name) { return replyEntry(req, real, mounted) }
                guard repository.isShown(in: parent) else {
                    var negative = fuse_entry_param()
                    fuse_reply_entry(req, &negative)
                    return
                }
                let id = repository.id(for: .repository(directory: parent))
                replyEntry(req, try repository.attributes(id), mounted)
                return
            }
        }
        do {
            replyEntry(req, try mounted.vault.lookup(parent, name), mounted)
        } catch let e as FSError where e.errno == ENOENT {
            // A negative entry: the kernel remembers "no such name" (only this mount changes the vault).
            var negative = fuse_entry_param()
            negative.entry_timeout = MountedVault.cacheSeconds
            fuse_reply_entry(req, &negative)
        }
    }
}

// The engine keeps every inode of the index in memory, so the kernel's lookup counts need no tracking.
@c(vaultaire_op_forget)
func opForget(_ req: FUSERequest, _ ino: fuse_ino_t, _ lookups: UInt64) { fuse_reply_none(req) }

@c(vaultaire_op_forget_multi)
func opForgetMulti(_ req: FUSERequest, _ count: Int, _ forgets: UnsafeMutablePointer<fuse_forget_data>?) {
    fuse_reply_none(req)
}

@c(vaultaire_op_getattr)
func opGetattr(_ req: FUSERequest, _ ino: fuse_ino_t, _ fi: FUSEFileInfo) {
    serve(req, "getattr") { mounted in
        let node = try mounted.node(ino)
        var st = attributes(of: node, mounted)
        fuse_reply_attr(req, &st, ThumbnailRepository.isVirtual(ino) ? 0 : MountedVault.cacheSeconds)
    }
}

/// chmod, chown, truncate and utimens arrive as one request.
@c(vaultaire_op_setattr)
func opSetattr(
    _ req: FUSERequest, _ ino: fuse_ino_t, _ attr: UnsafeMutablePointer<stat>?, _ toSet: Int32,
    _ fi: FUSEFileInfo
) {
    let killsSetID = requestKillsSetID()
    serve(req, "setattr") { mounted in
        try refuseVirtual(ino)
        let requested = attr!.pointee
        func has(_ flag: Int32) -> Bool { toSet & flag != 0 }
        if has(FUSE_SET_ATTR_SIZE) {
            let node = try mounted.vault.attributes(ino)
            guard node.kind == .file else { throw FSError(node.kind == .directory ? EISDIR : EINVAL) }
            try mounted.vault.setSize(ino, to: Int(requested.st_size))
        }
        let now = nowNanoseconds()
        var change = UnlockedVault.AttributeChange()
        if has(FUSE_SET_ATTR_MODE) { change.permissions = UInt32(requested.st_mode & 0o7777) }
        if has(FUSE_SET_ATTR_UID) { change.uid = requested.st_uid }
        if has(FUSE_SET_ATTR_GID) { change.gid = requested.st_gid }
        if has(FUSE_SET_ATTR_ATIME) {
            change.accessTime = has(FUSE_SET_ATTR_ATIME_NOW) ? now : nanoseconds(requested.st_atim)
        }
        if has(FUSE_SET_ATTR_MTIME) {
            change.modificationTime = has(FUSE_SET_ATTR_MTIME_NOW) ? now : nanoseconds(requested.st_mtim)
        }
        let metadataFlags =
            FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID
            | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME
        let changesMetadata = toSet & metadataFlags != 0
        var node = changesMetadata ? try mounted.vault.setAttributes(ino, change) : try mounted.vault.attributes(ino)
        if try dropSetIDBits(ifAsked: killsSetID, req, ino, mounted, replyCarriesAttributes: true) {
            node = try mounted.vault.attributes(ino)
        }
        var st = attributes(of: node, mounted)
        fuse_reply_attr(req, &st, MountedVault.cacheSeconds)
    }
}

@c(vaultaire_op_statfs)
func opStatfs(_ req: FUSERequest, _ ino: fuse_ino_t) {
    serve(req, "statfs") { mounted in
        var statistics = try mounted.vault.backingStatistics()
        statistics.f_namemax = UInt(UnlockedVault.maximumNameLength)
        statistics.f_files = UInt(mounted.vault.fileCount)
        fuse_reply_statfs(req, &statistics)
    }
}
