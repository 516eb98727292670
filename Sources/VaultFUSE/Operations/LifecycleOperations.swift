internal import CFuse
import Glibc

// The session's start (what this file system asks of the kernel) and end.

@c(vaultaire_op_init)
func opInit(_ userData: UnsafeMutableRawPointer?, _ conn: UnsafeMutablePointer<fuse_conn_info>?) {
    guard let userData, let conn else { return }
    let mounted = Unmanaged<MountedVault>.fromOpaque(userData).takeUnretainedValue()
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
    if !mounted.readOnly, conn.pointee.capable & UInt32(FUSE_CAP_WRITEBACK_CACHE) != 0 {
        conn.pointee.want |= UInt32(FUSE_CAP_WRITEBACK_CACHE)
        mounted.writebackCache = true
    }
}

@c(vaultaire_op_destroy)
func opDestroy(_ userData: UnsafeMutableRawPointer?) {
    guard let userData else { return }
    Unmanaged<MountedVault>.fromOpaque(userData).takeUnretainedValue().close()
}
