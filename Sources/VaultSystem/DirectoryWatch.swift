import Glibc

/// Watches directories, through inotify, for names of a kind arriving in them (a file created, moved
/// in or linked) while the watch runs. `finish` says which directories were watched without a break
/// and got no such name: what held for each when the watch began still holds.
///
/// Each directory is opened through no symbolic link and watched through its descriptor's
/// `/proc/self/fd` entry, so the inode watched is the one opened. A directory that cannot be watched
/// (no `/proc`, the user's inotify watches used up) is reported as not watched, never as quiet.
/// Events are read by a thread of the watch's own (`startReading`), in batches: a burst of new files
/// costs one wakeup per batch, not one per file.
public final class DirectoryWatch: @unchecked Sendable {  // used from one thread; its watcher is shared under a lock
    /// A directory's inode, to tell it from one put in its place.
    public struct Identity: Equatable, Sendable {
        public let device: UInt64
        public let inode: UInt64

        public init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }
    }

    private let watcher: Watcher
    private var thread: BackgroundThread.Joinable?

    /// Starts watching `directories` for names `notable` picks out; nil when inotify is not available.
    /// The kernel queues the events until `startReading`, or `finish`, reads them.
    public init?(directories: [AnchoredPath], notable: @escaping @Sendable (String) -> Bool) {
        guard let watcher = Watcher(directories: directories, notable: notable) else { return nil }
        self.watcher = watcher
    }

    /// Reads events as they come, on a thread of the watch's own, so that the kernel's queue (16,384
    /// events by default) never overflows however long the watch runs. A process that forks after
    /// the watch was made calls this in the process that goes on (no thread survives a fork). False
    /// when no thread could be made: events then queue until `finish`, and may overflow.
    @discardableResult
    public func startReading() -> Bool {
        guard thread == nil else { return true }
        let watcher = self.watcher
        thread = BackgroundThread.startJoinable(named: "vaultaire-watch") { watcher.run() }
        return thread != nil
    }

    /// A watch let go of unfinished stops its thread.
    deinit { stop() }

    /// Ends the watch (reading what the kernel still holds) and returns, for each directory given, its
    /// identity when it was watched throughout and no notable name arrived, nil otherwise. Call once.
    public func finish() -> [Identity?] {
        stop()
        watcher.readEvents()
        return watcher.quiet()
    }

    private func stop() {
        guard let thread else { return }
        watcher.signalStop()
        thread.join()
        self.thread = nil
    }
}

/// The watch's descriptors and what its events told, shared by the owner and the watch's thread.
private final class Watcher: @unchecked Sendable {  // `state` is reached only under its lock; the rest is immutable
    private struct State {
        /// Directories (by index) that got a name of the kind, or stopped being watched.
        var disturbed: Set<Int> = []
        /// The kernel dropped events: nothing can be said of any directory.
        var overflowed = false
    }

    private let inotify: Int32
    /// A pipe: its write end is written to end the thread, which polls its read end.
    private let stopSignal: Int32
    private let stopWriter: Int32
    private let directoryByWatch: [Int32: Int]
    private let identities: [DirectoryWatch.Identity?]
    private let notable: @Sendable (String) -> Bool
    private let state = Guarded(State())
    /// How long the thread lets events gather after a wakeup before it reads them again.
    private static let batchMilliseconds: Int32 = 20

    init?(directories: [AnchoredPath], notable: @escaping @Sendable (String) -> Bool) {
        let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard inotify >= 0 else { return nil }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            _ = close(inotify)
            return nil
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let mask = UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
        var directoryByWatch: [Int32: Int] = [:]
        var identities: [DirectoryWatch.Identity?] = []
        for (index, directory) in directories.enumerated() {
            var identity: DirectoryWatch.Identity?
            if let fd = try? directory.openDirectory() {
                var st = stat()
                let watch = inotify_add_watch(inotify, "/proc/self/fd/\(fd.rawValue)", mask)
                if watch >= 0, fstat(fd.rawValue, &st) == 0 {
                    directoryByWatch[watch] = index
                    identity = DirectoryWatch.Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
                }
            }
            identities.append(identity)
        }
        self.inotify = inotify
        self.stopSignal = ends[0]
        self.stopWriter = ends[1]
        self.directoryByWatch = directoryByWatch
        self.identities = identities
        self.notable = notable
    }

    deinit {
        _ = close(inotify)
        _ = close(stopSignal)
        _ = close(stopWriter)
    }

    func signalStop() {
        var one: UInt8 = 1
        _ = write(stopWriter, &one, 1)
    }

    func quiet() -> [DirectoryWatch.Identity?] {
        state.withLock { s in
            identities.indices.map { s.overflowed || s.disturbed.contains($0) ? nil : identities[$0] }
        }
    }

    func run() {
        var both = [
            pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopSignal, events: Int16(POLLIN), revents: 0),
        ]
        var stop = pollfd(fd: stopSignal, events: Int16(POLLIN), revents: 0)
        while true {
            if poll(&both, 2, -1) < 0 {
                guard errno == EINTR else { return }
                continue
            }
            if both[1].revents != 0 { return }
            readEvents()
            // Lets a burst gather; ends at once when the watch is finished.
            let woken = poll(&stop, 1, Watcher.batchMilliseconds)
            if woken > 0 || (woken < 0 && errno != EINTR) { return }
        }
    }

    /// Reads every event queued now.
    func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            buffer.withUnsafeBytes { handle(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        }
    }

    private func handle(_ events: UnsafeRawBufferPointer) {
        let headerSize = MemoryLayout<inotify_event>.size
        let lost = UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)
        var offset = 0
        while offset + headerSize <= events.count {
            let watch = events.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = events.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(events.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = events[(offset + headerSize)..<min(events.count, offset + headerSize + length)]
            offset += headerSize + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                state.withLock { $0.overflowed = true }
                continue
            }
            guard let directory = directoryByWatch[watch] else { continue }
            if mask & lost != 0 || notable(String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)) {
                state.withLock { _ = $0.disturbed.insert(directory) }
            }
        }
    }
}
