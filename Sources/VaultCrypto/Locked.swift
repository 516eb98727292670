import Glibc

/// A value behind a pthread mutex, for the module's few process-wide registries.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private var m = pthread_mutex_t()

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(&m, nil)
    }

    func withLock<R>(_ body: (inout Value) -> R) -> R {
        pthread_mutex_lock(&m)
        defer { pthread_mutex_unlock(&m) }
        return body(&value)
    }
}
