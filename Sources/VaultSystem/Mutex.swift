import Glibc

/// A plain pthread mutex; `withLock` keeps lock and unlock paired.
public final class Mutex: @unchecked Sendable {
    private var m = pthread_mutex_t()

    public init() { pthread_mutex_init(&m, nil) }
    deinit { pthread_mutex_destroy(&m) }

    @inline(__always)
    public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(&m)
        defer { pthread_mutex_unlock(&m) }
        return try body()
    }
}

/// A pthread read-write lock: `withLock` is exclusive, `withSharedLock` lets readers run together.
public final class ReadWriteLock: @unchecked Sendable {
    private var l = pthread_rwlock_t()

    public init() { pthread_rwlock_init(&l, nil) }
    deinit { pthread_rwlock_destroy(&l) }

    @inline(__always)
    public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_wrlock(&l)
        defer { pthread_rwlock_unlock(&l) }
        return try body()
    }

    @inline(__always)
    public func withSharedLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(&l)
        defer { pthread_rwlock_unlock(&l) }
        return try body()
    }
}
