import Glibc
import VaultFS
import VaultFUSE
import VaultFormat
import VaultKeychain
import VaultSystem

enum MountCommand {
    static let spec = CommandSpec(
        name: "mount", overview: "Unlock the vault and mount it as an ordinary folder; unmount to lock.",
        usage: "vaultaire mount <vault> <mountpoint> [--read-only] [--no-xattrs] [--no-io-uring] [--idle <duration>] [-f] [-o <option>]",
        arguments: [("<vault>", "The vault directory."), ("<mountpoint>", "An empty directory to mount on.")],
        options: [
            CommonOptions.passphraseFile,
            .init(long: "read-only", short: nil, valueName: nil, help: "Mount read-only."),
            .init(long: "no-xattrs", short: nil, valueName: nil,
                  help: "No extended attributes: saves the kernel's security.capability query on each new file's first write and on chown (see docs/PERFORMANCE.md)."),
            .init(long: "no-io-uring", short: nil, valueName: nil,
                  help: "Serve through reads and writes of /dev/fuse even where the kernel offers FUSE over io_uring (Linux 6.14+ with fuse.enable_uring=1)."),
            .init(long: "idle", short: nil, valueName: "duration", help: "Unmount (and lock) after this long without use: 90s, 15m, 2h."),
            .init(long: "foreground", short: "f", valueName: nil, help: "Stay attached to the terminal until unmounted."),
            .init(long: "option", short: "o", valueName: "option",
                  help: "Options, comma-separated: this command's own as name=value or name (passphrase-file=FILE, idle=15m, ro, no-xattrs …), others for libfuse, e.g. allow_other (repeatable).",
                  repeatable: true),
            CommonOptions.remember, CommonOptions.keychain,
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
        options.extra = libfuseOptions
        if let idle = args.value("idle") {
            guard let seconds = parseDuration(idle) else {
                throw CLIError.usage("--idle needs a duration such as 90s, 15m or 2h, got '\(idle)'", command: spec.name)
            }
            options.idleSeconds = seconds
        }
        do { try unlockAndServe(args, vault: vaultPath, on: mountpoint, options: options) } catch {
            // Also in the log, where a mount at boot or by mount(8) leaves its trace: a wrong
            // credential is an authentication failure worth recording.
            // (Once in the background the daemon has logged its own failures.)
            if case CLIError.usage = error {} else if !SystemLog.isUsingSyslog {
                SystemLog.record(.error, "\(vaultPath): mount on \(mountpoint) failed: \(report(error).0.dropFirst("Error: ".count))")
            }
            throw error
        }
    }

    private static func unlockAndServe(_ args: ParsedArguments, vault vaultPath: String, on mountpoint: String, options: MountOptions) throws {
        do { try Mounter.checkMountpoint(mountpoint) } catch { throw CLIError.message("\(error)", .mountFailed) }
        _ = try VaultAccess.readHeader(at: vaultPath)  // not a vault / unknown version: fail before asking
        let keychain = try selectKeychain(args)
        let master = try obtainMasterKey(args, vault: vaultPath, keychain: keychain).master
        let vault = try VaultAccess.open(at: vaultPath, master: master, keychain: keychain, readOnly: options.readOnly)
        for notice in vault.notices { printError("Notice: \(notice)") }
        if args.has("remember") { try keychain.storeMasterKey(master, for: vault.header.vaultID) }
        master.wipe()  // the vault's key schedule holds its own copy
        do {
            try Mounter.serve(vault, at: mountpoint, options: options) {
                print("Mounted \(vaultPath) on \(mountpoint)\(options.readOnly ? " (read-only)" : ""). 'vaultaire unmount \(mountpoint)' locks it.")
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
        guard Subprocess.run(["fusermount3", "-u", mountpoint]) == 0 else {
            throw CLIError.message("could not unmount \(mountpoint) (files still open? try again, or fusermount3 -uz)", .busy)
        }
        // The mount process persists and wipes after the kernel lets go; wait for its vault lock.
        let lock = mount.source + "/mount.lock"
        for _ in 0..<600 {
            let fd = open(lock, O_RDONLY | O_CLOEXEC)
            if fd < 0 { break }
            let free = flock(fd, LOCK_EX | LOCK_NB) == 0
            close(fd)
            if free { break }
            usleep(50_000)
        }
        print("Unmounted \(mountpoint); the vault is locked.")
    }
}

enum StatusCommand {
    static let spec = CommandSpec(
        name: "status", overview: "List mounted vaults and their mountpoints.",
        usage: "vaultaire status", arguments: [], options: [], minimumPositionals: 0, maximumPositionals: 0)

    static func run(_ args: ParsedArguments) throws {
        let mounts = MountTable.vaultaireMounts()
        if mounts.isEmpty { print("No vault is mounted."); return }
        for m in mounts { print("\(m.source) on \(m.mountpoint)\(m.readOnly ? " (read-only)" : "")") }
    }
}

func absolute(_ path: String) -> String {
    if path.hasPrefix("/") { return VaultLayout(root: path).root }
    var buf = [CChar](repeating: 0, count: Int(PATH_MAX))
    guard getcwd(&buf, buf.count) != nil else { return path }
    let cwd = String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return VaultLayout(root: cwd + "/" + path).root
}
