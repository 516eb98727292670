internal import CFuseWire
import Glibc
import VaultFS
import VaultFormat
import VaultSystem
import VaultThumbnails

/// The state every FUSE request reaches through its user data (`fuse_req_userdata`): the unlocked vault,
/// the time of the last request (for the idle timeout), and what is logged.
// Every FUSE thread reaches it. Its mutable fields are each written once at a point no request runs
// beside: `session` before serving, `writebackCache` while answering INIT (the kernel sends nothing
// else before that reply), `closeError` after serving; the activity clock is behind its own lock.
public final class MountedVault: @unchecked Sendable {
    public let vault: UnlockedVault
    let readOnly: Bool
    private var lastActivity = Atomic64(MonotonicClock.nanoseconds())
    /// Called once from libfuse's destroy callback, after the loop ends: persist, then wipe.
    var closeError: Error?
    /// Blocks of this size are what `stat` reports (cp and friends size their buffers by it).
    let preferredBlockSize = 128 * 1024

    /// How long the kernel may trust attributes, names and "no such name" answers. Only requests
    /// through this mount change the vault (the vault lock keeps other writers out), and the kernel
    /// updates or drops what each of those requests touches, so the answers stay valid.
    static let cacheSeconds: Double = 3600

    /// Whether the kernel agreed to use its write-back cache (asked for in init unless read-only).
    var writebackCache = false

    /// The libfuse session, for telling the kernel to drop cached attributes.
    var session: OpaquePointer?

    /// The virtual `.sh_thumbnails` directories (nil with `--no-thumbnails`).
    let thumbnailRepository: ThumbnailRepository?
    /// Makes thumbnails of files written through the mount (nil with `--no-thumbnails` or read-only).
    let thumbnailer: Thumbnailer?

    public init(vault: UnlockedVault, readOnly: Bool, thumbnails: Bool = true) {
        self.vault = vault
        self.readOnly = readOnly
        // Virtual inode numbers start far above the index's; a vault already past them gets none.
        let room = vault.nextInodeID < ThumbnailRepository.firstID
        thumbnailRepository = thumbnails && room ? ThumbnailRepository(vault: vault) : nil
        thumbnailer =
            thumbnails && !readOnly
            ? Thumbnailer(vault: vault, report: { SystemLog.log(.notice, "\(vault.layout.root): \($0)") }) : nil
        vault.onReport { [weak self] message in self?.log(.error, message) }
        thumbnailer?.attach()
        if thumbnails && !room {
            log(.warning, "inode numbers too high for the .sh_thumbnails directories; none shown")
        }
    }

    @inline(__always) func touch() { lastActivity.store(MonotonicClock.nanoseconds()) }
    var idleSeconds: Int64 { (MonotonicClock.nanoseconds() - lastActivity.load()) / 1_000_000_000 }

    /// The errno a failed operation replies with. Every I/O error — the host's (a failed read or
    /// write of a blob, a full disk) and data that fails authentication — is logged, without secrets.
    func errno(for error: Error, _ operation: String) -> Int32 {
        let e = FSError.errno(for: error)
        if MountedVault.isLogged(error, errno: e) {
            let node = vaultaire_wire_request_node()
            let file = node == 0 ? "" : vault.path(of: node).map { "\($0): " } ?? "inode \(node): "
            log(.error, "\(file)\(operation): \(error)")
        }
        return e
    }

    /// Answers about names and permissions (ENOENT, EEXIST, EACCES …) are the filesystem working;
    /// failures of storage and of authentication are not.
    static func isLogged(_ error: Error, errno e: Int32) -> Bool {
        if !(error is FSError) { return true }  // the host's system errors, format and crypto failures
        return [EIO, ENOSPC, EDQUOT, EFBIG, ENOMEM].contains(e)
    }

    /// Logs `message` about this vault (named by its path) to the daemon's log: syslog in the
    /// background, standard error in the foreground.
    func log(_ level: SystemLog.Level, _ message: String) {
        SystemLog.log(level, "\(vault.layout.root): \(message)")
    }

    /// Locks the vault: persist everything, then wipe keys and caches.
    func close() {
        // The thumbnailer reads files and writes thumbnails: it finishes before the keys go.
        thumbnailer?.stop()
        let report: (String) -> Void = { self.log(.warning, $0) }
        MemoryScanAtLock.around(vault, log: report) {
            do { try vault.close() } catch {
                closeError = error
                log(.error, "could not persist everything at unmount: \(error)")
            }
        }
    }
}

/// A 64-bit value read and written from many FUSE threads; a torn read would only skew the idle clock,
/// but a mutex keeps it exact at negligible cost.
struct Atomic64 {
    private let box: Box
    final class Box {
        var value: Int64
        var m = pthread_mutex_t()
        init(_ v: Int64) {
            value = v
            pthread_mutex_init(&m, nil)
        }
    }
    init(_ v: Int64) { box = Box(v) }
    func load() -> Int64 {
        pthread_mutex_lock(&box.m)
        defer { pthread_mutex_unlock(&box.m) }
        return box.value
    }
    func store(_ v: Int64) {
        pthread_mutex_lock(&box.m)
        box.value = v
        pthread_mutex_unlock(&box.m)
    }
}
