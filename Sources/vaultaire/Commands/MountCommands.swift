import Glibc
import VaultFS
import VaultFUSE
import VaultFormat
import VaultKeychain
import VaultSystem

enum MountCommand {
    static let spec = CommandSpec(
        name: "mount", overview: "Unlock the vault and mount it as an ordinary folder; unmount to lock.",
        usage:
            "vaultaire mount <vault> <mountpoint> [--read-only] [--no-xattrs] [--no-thumbnails] [--no-io-uring] [--idle <duration>] [-f] [-o <option>]",
        arguments: [("<vault>", "The vault directory."), ("<mountpoint>", "An empty directory to mount on.")],
        options: [
            CommonOptions.passphraseFile,
            .init(long: "read-only", short: nil, valueName: nil, help: "Mount read-only."),
            .init(
                long: "no-xattrs", short: nil, valueName: nil,
                help:
                    "No extended attributes: saves the kernel's security.capability query on each new file's first write and on chown (see docs/PERFORMANCE.md)."
            ),
            .init(
                long: "no-thumbnails", short: nil, valueName: nil,
                help:
                    "Make no thumbnails of images written to the mount and show no read-only .sh_thumbnails directories (see README, \"Thumbnails\")."
            ),
            .init(
                long: "no-io-uring", short: nil, valueName: nil,
                help:
                    "Serve through reads and writes of /dev/fuse even where the kernel offers FUSE over io_uring (Linux 6.14+ with fuse.enable_uring=1)."
            ),
            .init(
                long: "idle", short: nil, valueName: "duration",
                help: "Unmount (and lock) after this long without use: 90s, 15m, 2h."),
            .init(
                long: "foreground", short: "f", valueName: nil, help: "Stay attached to the terminal until unmounted."),
            .init(
                long: "option", short: "o", valueName: "option",
                help:
                    "Options, comma-separated: this command's own as name=value or name (passphrase-file=FILE, idle=15m, ro, no-xattrs …), others for libfuse, e.g. allow_other (repeatable).",
                repeatable: true),
            CommonOptions.remember, CommonOptions.keychain, CommonOptions.acceptRollback,
        ],
        minimumPositionals: 2, maximumPositionals: 2)

    static func run(_ parsed: ParsedArguments) throws {
        var args = parsed
        let libfuseOptions = try MountHelper.absorbOptions(&args, spec: spec)
        let vaultPath = absolute(args.positionals[0])
        let mountpoint = absolute(args.positionals[1])
        var options = MountOptions()
        options.readOnly = args.has("read-only")
        options.extendedAttributes = !args.has("no-xattrs")
        options.foreground = args.has("foreground")
        options.kernelRing = !args.has("no-io-uring")
        options.thumbnails = !args.has("no-thumbnails")
        options.extra = libfuseOptions
        if let idle = args.value("idle") {
            guard let seconds = parseDuration(idle) else {
                throw CLIError.usage(
                    "--idle needs a duration such as 90s, 15m or 2h, got '\(idle)'", command: spec.name)
            }
            options.idleSeconds = seconds
        }
        do { try unlockAndServe(args, vault: vaultPath, on: mountpoint, options: options) } catch {
            // Also in the log, where a mount at boot or by mount(8) leaves its trace: a wrong
            // credential is an authentication failure worth recording.
            // (Once in the background the daemon has logged its own failures.)
            if case CLIError.usage = error {
            } else if !SystemLog.isUsingSyslog {
                SystemLog.record(
                    .error, "\(vaultPath): mount on \(mountpoint) failed: \(report(error).0.dropFirst("Error: ".count))"
                )
            }
            throw error
        }
    }

    private static func unlockAndServe(
        _ args: ParsedArguments, vault vaultPath: String, on mountpoint: String, options: MountOptions
    ) throws {
        do { try Mounter.checkMountpoint(mountpoint) } catch { throw CLIError.message("\(error)", .mountFailed) }
        _ = try readVaultHeader(vaultPath)  // not a vault / unknown version: fail before asking
        let keychain = try selectKeychain(args)
        let master = try obtainMasterKey(args, vault: vaultPath, keychain: keychain).master
        let vault = try VaultAccess.open(
            at: vaultPath, master: master, keychain: keychain, readOnly: options.readOnly,
            acceptRollback: args.has("accept-rollback"))
        reportOpening(vault)
        WeakKDFWarning.printIfNoted()  // before the daemon detaches from stderr
        if args.has("remember") { try keychain.storeMasterKey(master, for: vault.header.vaultID) }
        // The vault works with the keys derived from it; its key schedule shares this buffer, so the
        // daemon holds no master key from here on.
        master.wipe()
        do {
            try Mounter.serve(vault, at: mountpoint, options: options) {
                print(
                    "Mounted \(vaultPath) on \(mountpoint)\(options.readOnly ? " (read-only)" : ""). 'vaultaire unmount \(mountpoint)' locks it."
                )
            }
        } catch let e as Mounter.Failure {
            throw CLIError.message(e.description, .mountFailed)
        }
    }

    static func parseDuration(_ text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600]
        if let n = Int(text), n > 0 { return n }
        guard let unit = text.last, let factor = units[unit], let n = Int(text.dropLast()), n > 0 else { return nil }
        return n * factor
    }
}

enum UnmountCommand {
    static let spec = CommandSpec(
        name: "unmount", overview: "Unmount a mounted vault; returns once the vault is persisted and locked.",
        usage: "vaultaire unmount <mountpoint>",
        arguments: [("<mountpoint>", "Where the vault is mounted.")],
        options: [], minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let mountpoint = absolute(args.positionals[0])
        guard let mount = MountTable.vaultaireMounts().first(where: { $0.mountpoint == mountpoint }) else {
            throw CLIError.message("no vault is mounted on \(mountpoint)", .notFound)
        }
        // The mount process answers on this socket once it has persisted and wiped (or failed to).
        // Abstract names are shared by every user: only a mount process of this user (or root) counts.
        let witness = LocalSocket.connect(name: UnmountWitnesses.socketName(device: mount.device)).flatMap { socket in
            LocalSocket.peerUID(socket.rawValue).map { $0 == getuid() || $0 == 0 } == true ? socket : nil
        }
        // `vaultaire unmount .` from inside the mount: this process's own working directory must not
        // keep the mount busy.
        _ = chdir("/")
        guard Subprocess.run(["fusermount3", "-u", mountpoint]) == 0 else {
            throw CLIError.message(
                "could not unmount \(mountpoint) (files still open? try again, or fusermount3 -uz)", .busy)
        }
        if let witness {
            try awaitLocking(witness, mountpoint: mountpoint)
        } else {
            waitForVaultLock(mount.source + "/mount.lock")
        }
        print("Unmounted \(mountpoint); the vault is locked.")
    }

    /// The mount process's own account of locking: "ok", or what it could not save.
    private static func awaitLocking(_ witness: FileDescriptorHandle, mountpoint: String) throws {
        guard let reply = witness.receiveAll(limit: 4096, timeoutSeconds: 600) else {
            throw CLIError.message(
                "unmounted \(mountpoint), but the mount process has not confirmed locking after 10 minutes", .ioError)
        }
        // Printed to a terminal: no control characters get through.
        let text = String(decoding: reply.prefix { $0 != 10 }.filter { $0 >= 0x20 && $0 != 0x7F }, as: UTF8.self)
        if text == "ok" { return }
        if text.hasPrefix("error: ") {
            throw CLIError.message(
                "unmounted \(mountpoint), but the mount process could not save everything: \(text.dropFirst(7)); "
                    + "keys are wiped, and the next open repairs the vault as after a crash", .ioError)
        }
        throw CLIError.message(
            "unmounted \(mountpoint), but the mount process ended without confirming that it saved everything", .ioError
        )
    }

    /// For a mount process that offers no witness socket: its vault lock is released once it is done.
    private static func waitForVaultLock(_ lock: String) {
        for _ in 0..<600 {
            let fd = open(lock, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            if fd < 0 { break }
            let free = flock(fd, LOCK_EX | LOCK_NB) == 0
            close(fd)
            if free { break }
            usleep(50_000)
        }
    }
}

enum StatusCommand {
    static let spec = CommandSpec(
        name: "status", overview: "List mounted vaults and their mountpoints.",
        usage: "vaultaire status", arguments: [], options: [], minimumPositionals: 0, maximumPositionals: 0)

    static func run(_ args: ParsedArguments) throws {
        let mounts = MountTable.vaultaireMounts()
        if mounts.isEmpty {
            print("No vault is mounted.")
            return
        }
        for m in mounts { print("\(m.source) on \(m.mountpoint)\(m.readOnly ? " (read-only)" : "")") }
    }
}

/// `path` made absolute against the working directory, with "." and ".." taken out by name (no
/// symlink is followed, and nothing is asked of a mount that may be hanging).
func absolute(_ path: String) -> String {
    var full = path
    if !path.hasPrefix("/") {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buf, buf.count) != nil else { return path }
        full =
            String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
    }
    var parts: [Substring] = []
    for part in full.split(separator: "/") where part != "." {
        if part == ".." { _ = parts.popLast() } else { parts.append(part) }
    }
    return "/" + parts.joined(separator: "/")
}
