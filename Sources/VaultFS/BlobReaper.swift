import Glibc
import VaultSystem

/// Removes the blobs of deleted files on a background thread, so that `unlink` (and so `rm -rf`)
/// answers once the index records the removal, without waiting for the host filesystem to free the
/// blob — the slowest step of a delete. The index is the truth: a blob the index no longer names is
/// never read again, and one a crash leaves behind is reported by `verify` as belonging to no file.
/// `drain()` waits until everything queued is gone; locking the vault drains.
/// Before each batch it runs `beforeRemoving` (the vault makes its journal durable there), so a blob is
/// removed only once the record that stopped naming it has reached the disk: a crash can never bring
/// back a file whose blob is gone.
final class BlobReaper: @unchecked Sendable {
    /// `rm -rf` queues one blob per request, a few tens of microseconds apart. The thread collects
    /// them for `gather` (or until `batchSize` wait) instead of waking per blob, and ends after
    /// `linger` without work; a thread or a wake-up per blob cost more than the removal itself.
    private let gather: timespec
    private let linger: timespec
    private let batchSize: Int
    private let beforeRemoving: () -> Bool

    private var pending: [AnchoredPath] = []
    private var working = false
    private var threadRunning = false
    private var drainers = 0
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let arrived = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let emptied = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init(
        gatherMilliseconds: Int = 20, lingerMilliseconds: Int = 1000, batchSize: Int = 256,
        beforeRemoving: @escaping () -> Bool = { true }
    ) {
        self.beforeRemoving = beforeRemoving
        gather = BlobReaper.duration(milliseconds: gatherMilliseconds)
        linger = BlobReaper.duration(milliseconds: lingerMilliseconds)
        self.batchSize = batchSize
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(arrived, &attributes)
        pthread_condattr_destroy(&attributes)
        pthread_cond_init(emptied, nil)
    }

    deinit {
        pthread_cond_destroy(emptied)
        pthread_cond_destroy(arrived)
        pthread_mutex_destroy(mutex)
        emptied.deallocate()
        arrived.deallocate()
        mutex.deallocate()
    }

    /// Queues files for removal.
    func remove(_ paths: [AnchoredPath]) {
        guard !paths.isEmpty else { return }
        pthread_mutex_lock(mutex)
        pending += paths
        if threadRunning {
            if pending.count >= batchSize { pthread_cond_signal(arrived) }
        } else {
            threadRunning = true
            startThread()
        }
        pthread_mutex_unlock(mutex)
    }

    /// Returns once every queued file has been removed.
    func drain() {
        pthread_mutex_lock(mutex)
        drainers += 1
        pthread_cond_signal(arrived)
        while !pending.isEmpty || working { pthread_cond_wait(emptied, mutex) }
        drainers -= 1
        pthread_mutex_unlock(mutex)
    }

    // The thread holds the reaper until it ends: after `linger` without new work.
    private func startThread() {
        BackgroundThread.start(named: "vaultaire-reap") { self.run() }
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            if pending.isEmpty {
                pthread_cond_broadcast(emptied)
                wait(upTo: linger) { !$0.pending.isEmpty }
                if pending.isEmpty { break }
            }
            // More removals usually follow the first: collect them before waking the host filesystem.
            wait(upTo: gather) { $0.pending.count >= batchSize || $0.drainers > 0 }
            let batch = pending
            pending = []
            working = true
            pthread_mutex_unlock(mutex)
            // Without a durable journal the batch stays on disk: stray blobs, which `verify --repair`
            // removes, are better than a file whose blob is gone.
            if beforeRemoving() { for file in batch { try? file.remove() } }
            pthread_mutex_lock(mutex)
            working = false
        }
        threadRunning = false
        pthread_mutex_unlock(mutex)
    }

    private static func duration(milliseconds: Int) -> timespec {
        timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
    }

    /// Whether the removal thread is alive (for tests).
    var isRunning: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return threadRunning
    }

    /// Waits on `arrived` (mutex held) until `done` holds or `limit` has passed.
    private func wait(upTo limit: timespec, until done: (BlobReaper) -> Bool) {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        deadline.tv_sec += limit.tv_sec
        deadline.tv_nsec += limit.tv_nsec
        if deadline.tv_nsec >= 1_000_000_000 {
            deadline.tv_sec += 1
            deadline.tv_nsec -= 1_000_000_000
        }
        while !done(self) {
            if pthread_cond_timedwait(arrived, mutex, &deadline) == ETIMEDOUT { return }
        }
    }
}
