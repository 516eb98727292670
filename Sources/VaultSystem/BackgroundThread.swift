import Glibc

/// A detached thread of the program's own (not Dispatch's): named, free to run on every CPU the
/// process may use (see `FileSystem.becomeBackgroundThread`), running `body` until it returns.
public enum BackgroundThread {
    /// False when no thread could be made (`body` then never runs).
    @discardableResult
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        final class Job: @unchecked Sendable {  // handed from this thread to the new one, never shared
            let name: String
            let body: @Sendable () -> Void
            init(_ name: String, _ body: @escaping @Sendable () -> Void) {
                self.name = name
                self.body = body
            }
        }
        var thread = pthread_t()
        let raw = Unmanaged.passRetained(Job(name, body)).toOpaque()
        let made = pthread_create(
            &thread, nil,
            { arg in
                let job = Unmanaged<Job>.fromOpaque(arg!).takeRetainedValue()
                FileSystem.becomeBackgroundThread(named: job.name)
                job.body()
                return nil
            }, raw)
        guard made == 0 else {
            Unmanaged<Job>.fromOpaque(raw).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
