import Glibc

/// Two pieces of work run at once, for the machine's other core: each result (or the first error, in
/// argument order) as if they had run one after the other. The first runs on the calling thread and
/// the second on a thread of its own, so that the first may do what belongs to one thread: show
/// progress, or start processes (Rclone sets close-on-exec on its pipes after making them, which is
/// safe only while no other thread starts one). Throws before running either when no thread can be
/// started.
public enum SideBySide {
    public static func run<A, B>(_ first: () throws -> A, _ second: () throws -> B) throws -> (A, B) {
        try withoutActuallyEscaping(second) { second in
            let helper = Helper(second)
            var thread = pthread_t()
            // Retained for the thread; joined before `second` goes out of scope.
            let job = Unmanaged.passRetained(Job(helper.run))
            let started = pthread_create(
                &thread, nil,
                { raw in
                    Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().body()
                    return nil
                }, job.toOpaque())
            guard started == 0 else {
                job.release()
                throw SystemError(errno: started, operation: "pthread_create")
            }
            let a = Result { try first() }
            pthread_join(thread, nil)
            return (try a.get(), try helper.result!.get())
        }
    }

    /// Written by the helper thread only, and read only after it has been joined.
    private final class Helper<B>: @unchecked Sendable {
        let work: () throws -> B
        var result: Result<B, Error>?
        init(_ work: @escaping () throws -> B) { self.work = work }
        func run() { result = Result { try work() } }
    }

    /// What the thread runs, without the generic type a C function pointer cannot carry.
    private final class Job: @unchecked Sendable {  // handed to the new thread, never shared
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }
}
