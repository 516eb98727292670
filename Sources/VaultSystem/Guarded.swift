import Glibc

/// A value behind a mutex: the only way to reach it is `withLock`. (VaultCrypto has its own
/// `Locked`; tests that import both modules @testable would find two of one name.)
final class Guarded<Value>: @unchecked Sendable {  // the mutex guards every access to `value`
    private var value: Value
    private let mutex = Mutex()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R { try mutex.withLock { try body(&value) } }
}
