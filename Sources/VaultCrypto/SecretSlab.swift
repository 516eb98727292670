import Glibc

/// Locked, dump-excluded memory for small secrets (keys, salts, nonces of key material), handed out
/// in 64-byte slots carved from 64 KiB regions. A page of its own per 32-byte key cost an `mlock`, a
/// `madvise` and a `munlock` for every file created or opened, and a page of the locked-memory
/// allowance for 32 bytes. Regions are kept for the life of the process; a slot is wiped by its
/// owner before it comes back.
final class SecretSlab: Sendable {
    static let slotSize = 64
    static let regionSize = 64 << 10

    struct Slot {
        let pointer: UnsafeMutableRawPointer
        let locked: Bool
    }

    private struct Pool {
        var free: [Slot] = []
        var regions: [(pointer: UnsafeMutableRawPointer, locked: Bool)] = []
    }

    private let pool = Locked(Pool())

    static let shared = SecretSlab()

    private init() {}

    /// A zeroed slot of `slotSize` bytes.
    func take() -> Slot {
        pool.withLock { pool in
            if pool.free.isEmpty { SecretSlab.addRegion(to: &pool) }
            return pool.free.removeLast()
        }
    }

    /// Returns a slot its owner has already wiped.
    func give(back slot: Slot) {
        pool.withLock { $0.free.append(slot) }
    }

    /// Locks every region again (memory locks are not inherited across fork).
    func relockAll() {
        pool.withLock { pool in
            for r in pool.regions { _ = mlock(r.pointer, SecretSlab.regionSize) }
        }
    }

    private static func addRegion(to pool: inout Pool) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, page, SecretSlab.regionSize) == 0, let raw else {
            fatalError("out of memory allocating secure storage")
        }
        memset(raw, 0, SecretSlab.regionSize)
        // Best effort, as for SecureBytes' own pages: a refused lock still leaves the wipe.
        let locked = mlock(raw, SecretSlab.regionSize) == 0
        _ = madvise(raw, SecretSlab.regionSize, MADV_DONTDUMP)
        pool.regions.append((raw, locked))
        for i in stride(from: SecretSlab.regionSize - SecretSlab.slotSize, through: 0, by: -SecretSlab.slotSize) {
            pool.free.append(Slot(pointer: raw + i, locked: locked))
        }
    }
}
