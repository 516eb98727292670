import Foundation

/// A value several test threads update: reachable only through `withLock`.
public final class Shared<Value>: @unchecked Sendable {  // the lock guards every access to `value`
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    @discardableResult
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    public var current: Value { withLock { $0 } }
}
