internal import CFuse
internal import CFuseWire
import Glibc
import VaultFS

/// Whether the request this thread serves asks the filesystem to clear set-ID bits (write, truncating
/// setattr or open, chown): with FUSE_HANDLE_KILLPRIV_V2 (negotiated in CFuseWire) the kernel leaves
/// that to the filesystem. CFuseWire notes it per thread when the request is read, and libfuse serves
/// a request on the thread that read it; a handler reads it once, first, and passes it down.
func requestKillsSetID() -> Bool { vaultaire_wire_request_kills_setid() != 0 }

/// Clears set-ID bits when `asked` (see `requestKillsSetID`). A write or open reply carries no
/// attributes, so the kernel is told to drop the mode it has cached. Returns whether the mode changed.
@discardableResult
func dropSetIDBits(
    ifAsked asked: Bool, _ req: FUSERequest, _ ino: fuse_ino_t, _ mounted: MountedVault,
    replyCarriesAttributes: Bool = false
) throws -> Bool {
    guard asked else { return false }
    let who = caller(req)
    let changed = try mounted.vault.dropSetIDBits(ino) { gid in
        who.uid == 0 || who.gid == gid || supplementaryGroups(req).contains(gid)
    }
    if changed, !replyCarriesAttributes, let session = mounted.session {
        _ = fuse_lowlevel_notify_inval_inode(session, ino, -1, 0)  // negative offset: attributes only
    }
    return changed
}
