internal import CFuse
internal import CFuseRing
internal import CFuseWire
import Glibc
import VaultCrypto
import VaultFS
import VaultSystem

/// How to mount.
public struct MountOptions {
    public var readOnly = false
    /// Serve user.* extended attributes. Without them the kernel learns at the first query that there
    /// are none and stops asking (it asks for security.capability at a file's first write and at
    /// chown; `ls -l` asks for security.selinux and an ACL per entry).
    public var extendedAttributes = true
    /// Make thumbnails of images written through the mount and show them in read-only
    /// `.sh_thumbnails` directories (docs/FORMAT.md "Thumbnails"); `--no-thumbnails` turns both off.
    public var thumbnails = true
    public var foreground = false
    /// Unmount after this many seconds without a request.
    public var idleSeconds: Int?
    /// Serve through FUSE over io_uring when the kernel allows it (Linux 6.14+ with the fuse module's
    /// enable_uring parameter on); otherwise, or when false, through reads and writes of /dev/fuse.
    public var kernelRing = true
    /// The mount's read-ahead window in KiB (0 leaves the kernel's, 128 KiB). The kernel asks a FUSE
    /// mount for the next part of a file it reads through in requests that fill this window; a wider
    /// one keeps several in flight, which the mount's threads decrypt side by side (docs/PERFORMANCE.md,
    /// "Read-ahead window"). Needs the right to write the mount's /sys/class/bdi entry (root).
    public var readAheadKiB = 1024
    /// Extra libfuse options from `-o` (allow_other and the like).
    public var extra: [String] = []
    public init() {}
}

/// Mounts an unlocked vault and serves it until it is unmounted (fusermount3 -u, `vaultaire unmount`,
/// SIGINT/SIGTERM/SIGHUP or the idle timeout). On every path the vault is persisted and then locked:
/// keys and plaintext caches wiped. Returns once the process should exit.
public enum Mounter {
    public enum Failure: Error, CustomStringConvertible {
        case setup(String)
        public var description: String {
            switch self {
            case .setup(let why): return why
            }
        }
    }

    /// Checks the mountpoint before anything is unlocked: an existing, empty directory.
    public static func checkMountpoint(_ path: String) throws {
        guard FileSystem.isDirectory(path) else { throw Failure.setup("mountpoint \(path) is not a directory") }
        guard try FileSystem.listDirectory(path).isEmpty else { throw Failure.setup("mountpoint \(path) is not empty") }
    }

    public static func serve(
        _ vault: UnlockedVault, at mountpoint: String, options: MountOptions,
        onReady: () -> Void
    ) throws {
        let mounted = MountedVault(vault: vault, readOnly: options.readOnly, thumbnails: options.thumbnails)
        let source = vault.layout.root.replacingOccurrences(of: ",", with: "\\,")
        var fuseOptions = [
            "fsname=\(source)", "subtype=vaultaire", "default_permissions", "max_read=\(ReplyBuffers.capacity)",
        ]
        if options.readOnly { fuseOptions.append("ro") }
        fuseOptions += options.extra
        let argv = ["vaultaire", "-o", fuseOptions.joined(separator: ",")]
        let cArgs = argv.map { strdup($0) }
        var args = fuse_args(argc: Int32(cArgs.count), argv: nil, allocated: 0)
        let argvBuffer = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: cArgs.count + 1)
        for (i, a) in cArgs.enumerated() { argvBuffer[i] = a }
        argvBuffer[cArgs.count] = nil
        args.argv = argvBuffer
        defer {
            for a in cArgs { free(a) }
            argvBuffer.deallocate()
        }

        var ops = makeOperations(extendedAttributes: options.extendedAttributes)
        let context = Unmanaged.passRetained(mounted)
        defer { context.release() }
        guard let session = fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, context.toOpaque())
        else {
            try? vault.close()
            throw Failure.setup("libfuse rejected the mount options")
        }
        // Resolved before mounting: once mounted, looking at the path waits for the INIT this process answers.
        let listedMountpoint = FileSystem.canonicalPath(mountpoint) ?? mountpoint
        guard fuse_session_mount(session, mountpoint) == 0 else {
            fuse_session_destroy(session)
            try? vault.close()
            throw Failure.setup("could not mount on \(mountpoint) (is /dev/fuse available, and fusermount3 installed?)")
        }
        mounted.session = session
        // Only if the mount now visible there is a vault's (ours, unless another was stacked on it meanwhile).
        let listed = MountTable.mount(at: listedMountpoint).flatMap { $0.fileSystemType == "fuse.vaultaire" ? $0 : nil }
        if options.readAheadKiB > 0, let listed {
            vaultaire_wire_set_read_ahead_after_init(
                "/sys/class/bdi/\(listed.device)/read_ahead_kb", UInt32(options.readAheadKiB))
        }
        var wire = fuse_custom_io()
        wire.read = vaultaire_wire_read
        wire.writev = vaultaire_wire_writev
        guard fuse_session_custom_io(session, &wire, fuse_session_fd(session)) == 0 else {
            fuse_session_unmount(session)
            fuse_session_destroy(session)
            try? vault.close()
            throw Failure.setup("libfuse refused the device reader")
        }
        onReady()
        fflush(nil)  // every stream: what onReady printed goes out before the fork
        if !options.foreground {
            // The parent returns to the shell from inside fuse_daemonize once the child is running.
            guard fuse_daemonize(0) == 0 else {
                fuse_session_unmount(session)
                fuse_session_destroy(session)
                try? vault.close()
                throw Failure.setup("could not detach from the terminal")
            }
            // mlock does not survive fork: lock the key pages again in this process.
            SecureBytes.relockAll()
            // The lock (an flock, shared with the parent, which has exited) is this process's now:
            // mount.lock must name it, so that "the vault is busy" points at the live daemon.
            do { try vault.recordLockHolder() } catch {
                mounted.log(.warning, "could not record the daemon's PID in mount.lock: \(error)")
            }
            // Standard error is /dev/null from here on.
            SystemLog.useSyslog()
            for notice in vault.notices { mounted.log(.warning, notice) }
        }
        // After daemonizing: these threads must run in the process that serves.
        vault.startWatchingForConflictCopies()
        let witnesses = listed.flatMap { UnmountWitnesses(device: $0.device) }
        mounted.log(.notice, "mounted on \(mountpoint)\(options.readOnly ? " (read-only)" : "")")
        ServiceManager.ready(status: "Mounted \(vault.layout.root) on \(mountpoint)")
        _ = fuse_set_signal_handlers(session)
        var rings: OpaquePointer?
        if options.kernelRing, vaultaire_ring_kernel_allows() != 0 {
            // If the rings cannot be set up (nil), the device loop alone serves, as without io_uring.
            rings = vaultaire_ring_prepare(
                fuse_session_fd(session), ReplyBuffers.capacity,
                { context, request, length in
                    var buffer = fuse_buf()
                    buffer.size = length
                    buffer.mem = request
                    fuse_session_process_buf(OpaquePointer(context), &buffer)
                }, UnsafeMutableRawPointer(session))
        }
        if let idle = options.idleSeconds { startIdleWatch(mounted, mountpoint: mountpoint, limit: idle) }
        _ = CFuse_session_loop_mt(session, 10)
        ServiceManager.stopping(status: "Unmounting \(mountpoint): saving and locking \(vault.layout.root)")
        fuse_remove_signal_handlers(session)
        fuse_session_unmount(session)
        vaultaire_ring_finish(rings)  // no request is being served once this returns
        fuse_session_destroy(session)  // runs the destroy operation: persist, then wipe
        mounted.close()  // idempotent; covers a loop that ended before destroy ran
        witnesses?.finish(mounted.closeError)
        if let e = mounted.closeError { throw e }
        mounted.log(.notice, "unmounted from \(mountpoint): saved and locked")
    }

    /// A thread that unmounts after `limit` seconds with no open file and no request. The unmount is
    /// the ordinary one, not lazy: while any process still holds something in the mount (a working
    /// directory, an open directory) the kernel refuses it, and the watch waits for another idle period
    /// rather than cut a program off. Once the kernel lets go, the session ends as with any unmount.
    private static func startIdleWatch(_ mounted: MountedVault, mountpoint: String, limit: Int) {
        BackgroundThread.start(named: "vaultaire-idle") {
            while true {
                sleep(1)
                if mounted.vault.hasOpenFiles {
                    mounted.touch()
                    continue
                }
                guard mounted.idleSeconds >= Int64(limit) else { continue }
                if Subprocess.run(["fusermount3", "-u", "-q", mountpoint]) == 0 {
                    mounted.log(.notice, "idle for \(limit) s: unmounted \(mountpoint) to lock the vault")
                    return
                }
                mounted.touch()
            }
        }
    }
}
