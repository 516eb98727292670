import CSystemShims
import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultSystem

/// What making one file's thumbnails came to.
public enum ThumbnailOutcome: Equatable, Sendable {
    case made
    /// The file is empty or no image: whatever thumbnails it had are gone.
    case removed
    /// An image none could be made of (too large, corrupt): the reason, for the log.
    case skipped(String)
    /// The file went away, or the vault cannot be written.
    case nothingToDo
}

/// Keeps a vault's thumbnails in step with its files, on one background thread at the lowest
/// priority (`SCHED_IDLE`, nice 19), so a `cp` into the mount is not slowed by it: the engine tells
/// it of each file released after writing (`UnlockedVault.onContentChanged`; a new file whose
/// first bytes are no image's is passed over there and then), the thread reads the file into secure
/// memory, makes both sizes with libvips, seals and stores them. Files queued again
/// while waiting are made once. Its mutex is a leaf: nothing else is taken under it.
public final class Thumbnailer: @unchecked Sendable {
    /// Files larger than this are not read whole into memory for a thumbnail.
    public static let maximumFileSize = 256 << 20

    private let vault: UnlockedVault
    private let report: @Sendable (String) -> Void
    private var queue: [UInt64] = []
    private var queued = Set<UInt64>()
    private var busy = false
    private var threadRunning = false
    private var stopped = false
    private var made = 0
    private var lookedAt = 0
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// `report` gets a line per image that got no thumbnail (for the daemon's log).
    public init(vault: UnlockedVault, report: @escaping @Sendable (String) -> Void) {
        self.vault = vault
        self.report = report
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    /// Follows the vault's changes from now on.
    public func attach() {
        vault.onContentChanged { [weak self] change in
            if Thumbnailer.needsLook(change) { self?.enqueue(change.id) }
        }
    }

    /// Whether a released file needs the thread's look: not when it was created since it was last
    /// opened (so it has no thumbnails to remove) and its first bytes, in hand, are no image's. Most
    /// files `tar x` or `cp -r` write are such, and each look would open and decrypt it again.
    static func needsLook(_ change: ContentChange) -> Bool {
        // `leadingBytes` holds at least `ImageKind.prefixLength` bytes, or the whole file.
        guard !change.mayHaveThumbnails, let head = change.leadingBytes else { return true }
        return ImageKind.sniff(head) != nil
    }

    /// Queues a file (cheap; any thread).
    public func enqueue(_ id: UInt64) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard !stopped, queued.insert(id).inserted else { return }
        queue.append(id)
        if threadRunning {
            pthread_cond_broadcast(changed)
        } else {
            threadRunning = true
            BackgroundThread.start(named: "vaultaire-thumb") { self.run() }
        }
    }

    /// Waits until everything queued so far is done.
    public func drain() {
        pthread_mutex_lock(mutex)
        while !queue.isEmpty || busy { pthread_cond_wait(changed, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// Drops what is still queued (`vaultaire thumbnails --rebuild` makes it later), waits for the
    /// file being made, and takes no more: called before the vault is locked.
    public func stop() {
        pthread_mutex_lock(mutex)
        stopped = true
        queue = []
        queued = []
        pthread_cond_broadcast(changed)
        while busy || threadRunning { pthread_cond_wait(changed, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// How many files got thumbnails so far (for the benchmark's rate).
    public var madeCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return made
    }

    /// How many files the thread looked at so far (made, removed or skipped).
    public var lookedAtCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return lookedAt
    }

    private func run() {
        _ = vaultaire_idle_priority()
        pthread_mutex_lock(mutex)
        while true {
            if queue.isEmpty && !stopped {
                pthread_cond_broadcast(changed)
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_sec += 2
                while queue.isEmpty && !stopped {
                    if pthread_cond_timedwait(changed, mutex, &deadline) == ETIMEDOUT { break }
                }
            }
            if queue.isEmpty || stopped { break }
            let id = queue.removeFirst()
            queued.remove(id)
            busy = true
            pthread_mutex_unlock(mutex)
            let outcome = Thumbnailer.refresh(vault, id)
            if case .skipped(let why) = outcome {
                report("no thumbnail for \(vault.path(of: id) ?? "inode \(id)"): \(why)")
            }
            pthread_mutex_lock(mutex)
            if outcome == .made { made += 1 }
            lookedAt += 1
            busy = false
            pthread_cond_broadcast(changed)
        }
        threadRunning = false
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
        ThumbnailMaker.threadDone()
    }

    /// The first `ImageKind.prefixLength` bytes of a file (fewer if it is shorter), wiped after use by
    /// the caller's `SecureBytes`.
    static func prefix(of id: UInt64, in vault: UnlockedVault) throws -> SecureBytes {
        let handle = try vault.open(id, write: false)
        defer { vault.release(handle) }
        let head = SecureBytes(count: ImageKind.prefixLength)
        var done = 0
        try head.withUnsafeMutableBytes { b in
            while done < b.count {
                let n = try vault.read(handle, at: done, into: UnsafeMutableRawBufferPointer(rebasing: b[done...]))
                if n == 0 { break }
                done += n
            }
        }
        return done == head.count ? head : head.slice(0..<done)
    }

    /// Makes (or removes) one file's thumbnails now, on the calling thread.
    public static func refresh(_ vault: UnlockedVault, _ id: UInt64) -> ThumbnailOutcome {
        guard !vault.readOnly, !vault.isClosed, let node = try? vault.attributes(id), node.kind == .file,
            node.linkCount > 0
        else { return .nothingToDo }
        let removeOld: () -> ThumbnailOutcome = {
            (try? vault.removeThumbnails(id)) == nil ? .nothingToDo : .removed
        }
        if node.size == 0 { return removeOld() }
        if node.size > UInt64(maximumFileSize) {
            _ = removeOld()
            return .skipped("larger than \(maximumFileSize >> 20) MiB")
        }
        // The first bytes say whether it is an image at all: a video or an archive is not read whole.
        guard let head = try? prefix(of: id, in: vault) else { return .nothingToDo }
        if head.withUnsafeBytes({ ImageKind.sniff($0) }) == nil { return removeOld() }
        let contents: SecureBytes
        let recorded: Inode
        do { (contents, recorded) = try vault.readContents(id, limit: maximumFileSize) } catch {
            if FSError.errno(for: error) == ENOENT { return .nothingToDo }
            return .skipped("cannot be read: \(error)")
        }
        defer { contents.wipe() }
        let images: (normal: [UInt8], large: [UInt8])
        do {
            images = try contents.withUnsafeBytes { try ThumbnailMaker.make($0) }
        } catch ThumbnailError.notAnImage {
            return removeOld()
        } catch {
            _ = removeOld()  // thumbnails of what the file held before would be stale
            return .skipped("\(error)")
        }
        do {
            try vault.setThumbnails(
                id,
                ThumbnailSet(
                    contentVersion: recorded.contentVersion, fileSize: recorded.size, normal: images.normal,
                    large: images.large))
            return .made
        } catch {
            if FSError.errno(for: error) == ENOENT { return .nothingToDo }
            return .skipped("could not be stored: \(error)")
        }
    }
}
