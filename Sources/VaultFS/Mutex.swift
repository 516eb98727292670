import Glibc

/// A plain pthread mutex; `withLock` keeps lock and unlock paired.
final class Mutex: @unchecked Sendable {
    private var m = pthread_mutex_t()

    init() { pthread_mutex_init(&m, nil) }
    deinit { pthread_mutex_destroy(&m) }

    @inline(__always)
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(&m)
        defer { pthread_mutex_unlock(&m) }
        return try body()
    }
}
