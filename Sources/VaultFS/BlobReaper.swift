import Glibc
import VaultSystem

/// Removes the blobs of deleted files on a background thread, so that `unlink` (and so `rm -rf`)
/// answers once the index records the removal, without waiting for the host filesystem to free the
/// blob — the slowest step of a delete. The index is the truth: a blob the index no longer names is
/// never read again, and one a crash leaves behind is reported by `verify` as belonging to no file.
/// `drain()` waits until everything queued is gone; locking the vault drains.
final class BlobReaper: @unchecked Sendable {
    private var pending: [String] = []
    private var working = false
    private var started = false
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let emptied = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(emptied, nil)
    }

    deinit {
        pthread_cond_destroy(emptied)
        pthread_mutex_destroy(mutex)
        emptied.deallocate()
        mutex.deallocate()
    }

    /// Queues files for removal.
    func remove(_ paths: [String]) {
        pthread_mutex_lock(mutex)
        pending += paths
        if !started {
            started = true
            startThread()
        }
        pthread_mutex_unlock(mutex)
    }

    /// Returns once every queued file has been removed.
    func drain() {
        pthread_mutex_lock(mutex)
        while !pending.isEmpty || working { pthread_cond_wait(emptied, mutex) }
        pthread_mutex_unlock(mutex)
    }

    // A thread runs while there is work and ends when the queue is empty; the next removal starts another.
    private func startThread() {
        var thread = pthread_t()
        let raw = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { arg in
            Unmanaged<BlobReaper>.fromOpaque(arg!).takeRetainedValue().run()
            return nil
        }, raw)
        pthread_detach(thread)
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while !pending.isEmpty {
            let batch = pending
            pending = []
            working = true
            pthread_mutex_unlock(mutex)
            for path in batch { try? FileSystem.remove(path) }
            pthread_mutex_lock(mutex)
            working = false
        }
        started = false
        pthread_cond_broadcast(emptied)
        pthread_mutex_unlock(mutex)
    }
}
