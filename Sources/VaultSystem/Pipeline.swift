import Glibc

/// Two stages of work at once, one on the calling thread and one on a helper thread (`SideBySide`):
/// `make` hands batches on with `send`, in order, while `use` takes them with `receive`. The first
/// failure of either stage stops both: `send` then answers false, `receive` nil, and `run` throws
/// that failure once both stages have returned — whatever the other stage did with what it had.
public enum Pipeline {
    /// Which stage runs on the calling thread: the one that shows progress or starts processes.
    public enum CallingThread { case makes, uses }

    /// Runs both stages to their end and returns what each returned, or throws the first failure.
    /// - Parameters:
    ///   - make: makes the batches; stops early when `send` answers false.
    ///   - use: takes batches until `receive` answers nil; `receive` waits for the next and returns
    ///     every batch made since the last call, so that a stage that fell behind catches up in one step.
    ///   - capacity: at most this many batches wait for the user; `send` waits for room (nil: no limit).
    public static func run<Batch: Sendable, Made, Used>(
        callingThread: CallingThread, capacity: Int? = nil, make: (_ send: (Batch) -> Bool) throws -> Made,
        use: (_ receive: () -> [Batch]?) throws -> Used
    ) throws -> (Made, Used) {
        let handOff = HandOff<Batch>(capacity: capacity ?? Int.max)
        func making() -> Result<Made, Error> {
            let made = Result { try make(handOff.send) }
            if case .failure(let e) = made { handOff.fail(e) } else { handOff.finish() }
            return made
        }
        func using() -> Result<Used, Error> {
            let used = Result { try use(handOff.receive) }
            // A user that returns early takes nothing more: the maker is told to stop.
            if case .failure(let e) = used { handOff.fail(e) } else { handOff.close() }
            return used
        }
        let made: Result<Made, Error>
        let used: Result<Used, Error>
        if callingThread == .makes {
            (made, used) = try SideBySide.run(making, using)
        } else {
            (used, made) = try SideBySide.run(using, making)
        }
        if let failure = handOff.failure { throw failure }
        return (try made.get(), try used.get())
    }
}

/// The batches between the two stages, and how the pipeline stands, behind one mutex with a
/// condition variable for the waiting stage.
private final class HandOff<Batch: Sendable>: @unchecked Sendable {  // `state` is touched only with `mutex` held
    private struct State {
        var ready: [Batch] = []
        /// The maker sent its last batch.
        var finished = false
        /// The user takes no more.
        var closed = false
        /// The first failure of either stage.
        var failure: Error?
    }

    private var state = State()
    private let capacity: Int
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    private func withLock<R>(_ body: (inout State) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&state)
    }

    /// Queues `batch` for the user, once there is room; false once the pipeline failed or the user
    /// takes no more.
    func send(_ batch: Batch) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while state.ready.count >= capacity && state.failure == nil && !state.closed {
            pthread_cond_wait(changed, mutex)
        }
        guard state.failure == nil && !state.closed else { return false }
        state.ready.append(batch)
        pthread_cond_broadcast(changed)
        return true
    }

    /// Waits for batches; every one queued, or nil when the maker has finished and all were taken,
    /// or the pipeline failed.
    func receive() -> [Batch]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while state.ready.isEmpty && !state.finished && state.failure == nil { pthread_cond_wait(changed, mutex) }
        guard state.failure == nil, !state.ready.isEmpty else { return nil }
        defer {
            state.ready = []
            pthread_cond_broadcast(changed)  // a maker waiting for room
        }
        return state.ready
    }

    /// The maker has sent its last batch.
    func finish() {
        withLock { s in
            s.finished = true
            pthread_cond_broadcast(changed)
        }
    }

    /// The user takes no more: later sends answer false.
    func close() {
        withLock { s in
            s.closed = true
            pthread_cond_broadcast(changed)
        }
    }

    /// Stops the pipeline with `error`, unless it has already failed: the first failure is the one reported.
    func fail(_ error: Error) {
        withLock { s in
            if s.failure == nil { s.failure = error }
            pthread_cond_broadcast(changed)
        }
    }

    var failure: Error? { withLock { $0.failure } }
}
