import Glibc

/// Locked, dump-excluded memory for small secrets (keys, salts, nonces of key material), handed out
/// in 64-byte slots carved from 64 KiB regions. A page of its own per 32-byte key cost an `mlock`, a
/// `madvise` and a `munlock` for every file created or opened, and a page of the locked-memory
/// allowance for 32 bytes. Regions are kept for the life of the process; a slot is wiped by its
/// owner before it comes back.
final class SecretSlab: @unchecked Sendable {
    static let slotSize = 64
    static let regionSize = 64 << 10

    struct Slot {
        let pointer: UnsafeMutableRawPointer
        let locked: Bool
    }

    private var free: [Slot] = []
    private var regions: [(pointer: UnsafeMutableRawPointer, locked: Bool)] = []
    private var m = pthread_mutex_t()

    static let shared = SecretSlab()

    private init() { pthread_mutex_init(&m, nil) }

    /// A zeroed slot of `slotSize` bytes.
    func take() -> Slot {
        pthread_mutex_lock(&m)
        defer { pthread_mutex_unlock(&m) }
        if free.isEmpty { addRegion() }
        return free.removeLast()
    }

    /// Returns a slot its owner has already wiped.
    func give(back slot: Slot) {
        pthread_mutex_lock(&m)
        free.append(slot)
        pthread_mutex_unlock(&m)
    }

    /// Locks every region again (memory locks are not inherited across fork).
    func relockAll() {
        pthread_mutex_lock(&m)
        defer { pthread_mutex_unlock(&m) }
        for r in regions { _ = mlock(r.pointer, SecretSlab.regionSize) }
    }

    // Caller holds `m`.
    private func addRegion() {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, page, SecretSlab.regionSize) == 0, let raw else {
            fatalError("out of memory allocating secure storage")
        }
        memset(raw, 0, SecretSlab.regionSize)
        // Best effort, as for SecureBytes' own pages: a refused lock still leaves the wipe.
        let locked = mlock(raw, SecretSlab.regionSize) == 0
        _ = madvise(raw, SecretSlab.regionSize, MADV_DONTDUMP)
        regions.append((raw, locked))
        for i in stride(from: SecretSlab.regionSize - SecretSlab.slotSize, through: 0, by: -SecretSlab.slotSize) {
            free.append(Slot(pointer: raw + i, locked: locked))
        }
    }
}
