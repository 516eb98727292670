import Glibc

/// A thread of the program's own (not Dispatch's): named, free to run on every CPU the process may
/// use (see `FileSystem.becomeBackgroundThread`), running `body` until it returns.
public enum BackgroundThread {
    /// Starts a detached thread; false when no thread could be made (`body` then never runs).
    @discardableResult
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        guard let thread = create(named: name, body) else { return false }
        pthread_detach(thread)
        return true
    }

    /// Starts a thread that is waited for with `Joinable.join`; nil when no thread could be made.
    public static func startJoinable(named name: String, _ body: @escaping @Sendable () -> Void) -> Joinable? {
        create(named: name, body).map(Joinable.init)
    }

    /// A thread to wait for once, from one other thread.
    public final class Joinable: @unchecked Sendable {  // `joined` is touched only by the one thread that joins
        private let thread: pthread_t
        private var joined = false

        init(_ thread: pthread_t) { self.thread = thread }

        /// Waits until the thread's body has returned.
        public func join() {
            guard !joined else { return }
            joined = true
            pthread_join(thread, nil)
        }
    }

    private static func create(named name: String, _ body: @escaping @Sendable () -> Void) -> pthread_t? {
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
            return nil
        }
        return thread
    }
}
