import Glibc

/// Work that waits on the disk rather than the CPU, spread over more threads than there are cores:
/// `body(i)` for every `i` in `0..<count`, each thread taking the next index as it finishes one. Many
/// small syncs in flight together cost the disk about what one does (the kernel merges the cache
/// flushes they ask for); one after another, each pays a flush of its own.
public enum WaitingThreads {
    /// Runs `body` for each index on `threads` threads (the calling thread one of them) and returns
    /// when all have returned. The first failure stops the indices not yet taken and is thrown. A
    /// thread that cannot be started leaves its share to the others.
    public static func forEach(_ count: Int, threads: Int, _ body: (Int) throws -> Void) throws {
        guard count > 0 else { return }
        try withoutActuallyEscaping(body) { body in
            let work = Work(count: count, body: body)
            var helpers: [pthread_t] = []
            for _ in 1..<max(1, min(threads, count)) {
                var thread = pthread_t()
                let job = Unmanaged.passRetained(work)  // released by the thread; joined below
                let started = pthread_create(
                    &thread, nil,
                    { raw in
                        Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue().run()
                        return nil
                    }, job.toOpaque())
                guard started == 0 else {
                    job.release()
                    break
                }
                helpers.append(thread)
            }
            work.run()
            for thread in helpers { pthread_join(thread, nil) }
            if let failure = work.failure { throw failure }
        }
    }

    /// The indices still to take and the first failure, shared by the threads behind one mutex;
    /// `body` is called outside it.
    private final class Work: @unchecked Sendable {  // `state` is touched only within `withLock`
        let count: Int
        let body: (Int) throws -> Void
        private let state = Guarded((next: 0, failure: Error?.none))

        init(count: Int, body: @escaping (Int) throws -> Void) {
            self.count = count
            self.body = body
        }

        var failure: Error? { state.withLock { $0.failure } }

        func run() {
            while true {
                let taken: Int? = state.withLock { s in
                    guard s.next < count else { return nil }
                    s.next += 1
                    return s.next - 1
                }
                guard let i = taken else { return }
                do { try body(i) } catch {
                    state.withLock { s in
                        if s.failure == nil { s.failure = error }
                        s.next = count
                    }
                    return
                }
            }
        }
    }
}
