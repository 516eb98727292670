/// A replaceable callback behind a mutex, called without holding it.
///
/// Not `Guarded<((Argument) -> Void)?>`: a closure kept in a generic container and reached through
/// its `inout` accessor is converted to the container's abstraction and back at every access, and the
/// write-back stores the wrapped closure, so each call nests two more thunks around the handler. A
/// handler called at every file release grew a call chain as long as the files written since mount.
/// Here the closure is only read, never written back, so it stays one call deep.
public final class Handler<Argument>: @unchecked Sendable {  // the mutex guards every access to `handler`
    private var handler: ((Argument) -> Void)?
    private let mutex = Mutex()

    public init() {}

    /// Replaces the handler.
    public func set(_ handler: @escaping (Argument) -> Void) { mutex.withLock { self.handler = handler } }

    /// Calls the handler, if any, outside the lock.
    public func call(_ argument: Argument) {
        let current = mutex.withLock { handler }
        current?(argument)
    }
}
