import Glibc

/// A value behind a mutex: the only way to reach it is `withLock`, so nothing can touch it unlocked.
/// (VaultCrypto has its own small `Locked` for its registries; this one is the public one.)
public final class Guarded<Value>: @unchecked Sendable {  // the mutex guards every access to `value`
    private var value: Value
    private let mutex = Mutex()

    public init(_ value: Value) { self.value = value }

    @inline(__always)
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try mutex.withLock { try body(&value) }
    }
}
