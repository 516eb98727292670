import Glibc
import VaultBackup
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

enum BackupCommand {
    static let spec = CommandSpec(
        name: "backup",
        overview: "Back up a vault's ciphertext to any rclone remote, incrementally; list or verify its snapshots.",
        usage: """
            vaultaire backup <vault> <remote:path> [--keep <n>] [--passphrase-file <file>]
                   vaultaire backup --list <remote:path> [--passphrase-file <file> | --recovery-phrase-file <file>]
                   vaultaire backup --verify <remote:path> [--snapshot <id>] [--passphrase-file <file> | --recovery-phrase-file <file>]
            """,
        arguments: [
            ("<vault>", "The vault directory (locked, or mounted read-only)."),
            (
                "<remote:path>",
                "Where the backup lives, as rclone names it: a configured remote (mys3:bucket/vault), an on-the-fly one (:sftp,host=…:path) or a local path."
            ),
        ],
        options: [
            .init(
                long: "keep", short: nil, valueName: "n",
                help: "Keep the newest N snapshots (default 3); older ones and objects no kept one needs are deleted."),
            .init(
                long: "list", short: nil, valueName: nil,
                help: "List the snapshots on the remote: ID, date, files, bytes."),
            .init(
                long: "verify", short: nil, valueName: nil,
                help: "Download a snapshot and check every object against its authenticated manifest."),
            .init(
                long: "snapshot", short: nil, valueName: "id",
                help: "With --verify: the snapshot to check (default the newest)."),
            .init(
                long: "accept-rollback", short: nil, valueName: nil,
                help: "With --verify: check a snapshot older than the newest this device has seen."),
            CommonOptions.passphraseFile,
            .init(
                long: "recovery-phrase-file", short: nil, valueName: "file",
                help: "With --list or --verify: unlock with the recovery phrase from FILE."),
            CommonOptions.keychain, CommonOptions.quiet,
        ],
        minimumPositionals: 1, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        do { try backup(args) } catch {
            throw namingWhere(
                error, vault: args.positionals.count == 2 ? args.positionals[0] : nil,
                remote: args.positionals.last.map { Rclone(remote: $0).remote })
        }
    }

    static func backup(_ args: ParsedArguments) throws {
        if args.has("list") || args.has("verify") {
            guard args.positionals.count == 1, !(args.has("list") && args.has("verify")) else {
                throw CLIError.usage(
                    "--list and --verify take one <remote:path> and exclude each other", command: spec.name)
            }
            let rclone = makeRclone(args.positionals[0])
            let unlocking = try remoteUnlocking(args, newCredential: false)
            if args.has("list") { try list(rclone, unlocking, args) } else { try verify(rclone, unlocking, args) }
            return
        }
        guard args.positionals.count == 2 else {
            throw CLIError.usage("backup needs <vault> and <remote:path>", command: spec.name)
        }
        let keep = try args.integer("keep", default: 3, command: spec.name)
        let path = args.positionals[0]
        let keychain = try selectKeychain(args)
        // The backup opens with the passphrase alone, through a backup envelope made from it now: a
        // remembered key cannot stand in for the credential here.
        let header = try readVaultHeader(path)
        let slot = try thisDeviceSlot(header, keychain: keychain)
        let credential = try currentCredential(args, header: header, keychain: keychain)
        // The two key derivations (this device's slot, the backup key) need only the credential: on two
        // cores at once, the backup waits for one PBKDF2 instead of two.
        let (master, backupKey) = try SideBySide.run(
            { try VaultAccess.unwrapMasterKey(at: path, credential: credential, keychain: keychain) },
            { try header.backupKey(credential: credential, iterations: Int(slot.iterations)) })
        defer {
            master.wipe()
            backupKey.wipe()
        }
        let backupHeader = try BackupHeader(
            of: header, slot: slot,
            backup: try header.makeBackupEnvelope(
                master: master, backupKey: backupKey, iterations: Int(slot.iterations)))
        let rclone = makeRclone(args.positionals[1])
        let line = ProgressLine(quiet: args.has("quiet"))
        rclone.progress = line.active ? { line.show("uploading: \($0)") } : nil
        let s: Backup.Summary
        do {
            s = try Backup.run(
                vault: path, master: master, backupHeader: backupHeader, keychain: keychain, rclone: rclone,
                keep: keep,
                status: line.show,
                notice: {
                    line.clear()
                    printError("Notice: \($0)")
                })
        } catch let e as FSError where e.errno == EBUSY {
            line.clear()
            throw CLIError.message(
                "local \(path) is open read-write (\(e)): unmount it or mount it --read-only, then back up", .busy)
        }
        line.clear()
        print(
            "Snapshot \(s.snapshot) of \(path) on \(rclone.remote): \(s.files) files, \(s.fileBytes) bytes; "
                + "read \(s.vaultFilesRead) of \(s.vaultFiles) vault files (the others unchanged since the last backup); "
                + "uploaded \(s.objectsUploaded) objects, \(s.bytesUploaded) bytes, and a manifest of \(s.manifestBytes) bytes"
                + "\(s.headerUploaded ? " and a backup header" : ""); \(s.objectsPresent) objects already there; "
                + "kept \(s.snapshotsKept) snapshots, removed \(s.snapshotsRemoved) snapshots and \(s.objectsRemoved) objects."
        )
    }

    static func list(_ rclone: Rclone, _ unlocking: Restore.Unlocking, _ args: ParsedArguments) throws {
        let line = ProgressLine(quiet: args.has("quiet"))
        let rows = try Listing.run(
            rclone: rclone, unlocking: unlocking, status: line.show,
            notice: {
                line.clear()
                printError("Notice: \($0)")
            })
        line.clear()
        print("ID          DATE (UTC)            FILES        BYTES       STORED")
        for r in rows {
            let id = BackupFormat.snapshotName(r.id)
            guard let m = r.manifest else {
                print("\(id)  DAMAGED: \(r.damage ?? "")")
                continue
            }
            print(
                "\(id)  \(utcDate(m.created))  \(String(m.files).leftPadded(9))  \(String(m.fileBytes).leftPadded(11))  \(String(m.storedBytes).leftPadded(11))"
            )
        }
        let damaged = rows.filter { $0.manifest == nil }.count
        if damaged > 0 {
            throw BackupError.remoteDamaged(
                remote: rclone.remote, what: "\(damaged) snapshot manifest(s) fail authentication")
        }
    }

    static func verify(_ rclone: Rclone, _ unlocking: Restore.Unlocking, _ args: ParsedArguments) throws {
        let line = ProgressLine(quiet: args.has("quiet"))
        rclone.progress = line.active ? { line.show("downloading: \($0)") } : nil
        let s = try Restore.verify(
            rclone: rclone, snapshot: try snapshotOption(args), unlocking: unlocking,
            acceptRollback: args.has("accept-rollback"), status: line.show)
        line.clear()
        print(
            "Snapshot \(s.snapshot) on \(rclone.remote) (\(utcDate(s.created))): manifest authentic, \(s.objects) objects (\(s.objectBytes) bytes) match their hashes; \(s.files) files, \(s.fileBytes) bytes."
        )
    }
}

enum RestoreCommand {
    static let spec = CommandSpec(
        name: "restore",
        overview:
            "Restore a vault from a backup with the passphrase or the recovery phrase alone (also on a new machine).",
        usage:
            "vaultaire restore <remote:path> <new-vault> [--snapshot <id>] [--passphrase-file <file> | --recovery-phrase-file <file> [--new-passphrase-file <file>] [--pattern]]",
        arguments: [
            ("<remote:path>", "The backup, as rclone names it (see 'vaultaire help backup')."),
            ("<new-vault>", "Where to put the vault: a new or empty directory."),
        ],
        options: [
            .init(
                long: "snapshot", short: nil, valueName: "id",
                help: "The snapshot to restore (default the newest; see backup --list)."),
            .init(
                long: "accept-rollback", short: nil, valueName: nil,
                help: "Restore a snapshot older than the newest this device has seen from this remote."),
            CommonOptions.passphraseFile,
            .init(
                long: "recovery-phrase-file", short: nil, valueName: "file",
                help: "Unlock with the recovery phrase from FILE instead; then a new credential is set."),
            .init(
                long: "new-passphrase-file", short: nil, valueName: "file",
                help: "With the recovery phrase: read the new credential from FILE."),
            .init(
                long: "pattern", short: nil, valueName: nil,
                help: "With the recovery phrase: the new credential is a pattern."),
            CommonOptions.keychain, CommonOptions.quiet,
        ],
        minimumPositionals: 2, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        do { try restore(args) } catch {
            throw namingWhere(error, vault: nil, remote: Rclone(remote: args.positionals[0]).remote)
        }
    }

    static func restore(_ args: ParsedArguments) throws {
        let rclone = makeRclone(args.positionals[0])
        let target = args.positionals[1]
        let keychain = try selectKeychain(args)
        let unlocking = try remoteUnlocking(args, newCredential: true)
        let line = ProgressLine(quiet: args.has("quiet"))
        rclone.progress = line.active ? { line.show("downloading: \($0)") } : nil
        let s = try Restore.run(
            rclone: rclone, snapshot: try snapshotOption(args), target: target, keychain: keychain,
            unlocking: unlocking, acceptRollback: args.has("accept-rollback"), status: line.show)
        line.clear()
        print(
            "Restored snapshot \(s.snapshot) (\(utcDate(s.created))) into \(target): \(s.files) files, \(s.fileBytes) bytes; "
                + "\(s.objects) objects checked against their hashes, \(s.chunksChecked) chunks authenticated; bound to this device's salt."
        )
    }
}

/// How a remote's backup header is opened: with the credential (backup envelope) or, with
/// --recovery-phrase-file, the recovery phrase; and which credential a restored vault gets.
func remoteUnlocking(_ args: ParsedArguments, newCredential wantsNew: Bool) throws -> Restore.Unlocking {
    if args.value("recovery-phrase-file") != nil {
        let phraseBytes = try SecretInput.obtain(
            args, fileOption: "recovery-phrase-file", prompt: "Recovery phrase: ", confirm: false)
        // The phrase must pass through a String for Unicode normalization; see RecoveryPhrase.
        let phrase = phraseBytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        phraseBytes.wipe()
        let normalized = try RecoveryPhrase.validate(phrase, words: try Wordlist.load())
        var chosen: (Credential, Pattern?)?
        return Restore.Unlocking(
            open: { try $0.unlock(recoveryPhrase: normalized) },
            newCredential: { _ in
                if let chosen { return chosen }
                chosen = try newCredential(args, fileOption: "new-passphrase-file", pattern: args.has("pattern"))
                return chosen!
            })
    }
    var secret: SecureBytes?
    func credential(for header: BackupHeader) throws -> (Credential, Pattern?) {
        let c = header.vaultHeader.slots[0]
        if secret == nil {
            secret = try SecretInput.obtain(
                args, fileOption: "passphrase-file",
                prompt: c.kind == .pattern ? "Pattern (e.g. a1-b2-c3-d4): " : "Passphrase: ", confirm: false)
        }
        return try makeCredential(secret!, kind: c.kind, rows: Int(c.patternRows), columns: Int(c.patternColumns))
    }
    return Restore.Unlocking(
        open: { try $0.unlock(credential: try credential(for: $0).0) },
        newCredential: { try credential(for: $0) })
}

func makeRclone(_ remote: String) -> Rclone { Rclone(remote: remote) }

/// The errors whose usual message does not say where the problem is — the local vault or the remote
/// — reworded so that it does; the exit code stays.
func namingWhere(_ error: Error, vault: String?, remote: String?) -> Error {
    switch error {
    case FormatError.wrongCredential:
        if let vault { return CLIError.message("local \(vault): wrong credential", .wrongCredential) }
        if let remote {
            return CLIError.message(
                "remote \(remote): wrong credential (it opens no backup header there)", .wrongCredential)
        }
    case FormatError.notAVault(let path):
        return CLIError.message("local \(path) is not a Vaultaire vault (no vault.header)", .notAVault)
    case FormatError.deviceMismatch:
        if let vault { return CLIError.message("local \(vault): \(FormatError.deviceMismatch)", .deviceMismatch) }
    case let e as FormatError:
        if let vault, case .damaged = e { return CLIError.message("in-vault \(vault): \(e)", .damaged) }
        if let vault, case .malformed = e { return CLIError.message("in-vault \(vault): \(e)", .damaged) }
    default:
        break
    }
    return error
}

func snapshotOption(_ args: ParsedArguments) throws -> UInt64? {
    guard let v = args.value("snapshot") else { return nil }
    guard let id = UInt64(v), id > 0 else {
        throw CLIError.usage(
            "--snapshot needs a snapshot ID (a positive number, see backup --list), got '\(v)'", command: nil)
    }
    return id
}

/// "2026-12-04 15:50:01" (UTC) for nanoseconds since the epoch.
func utcDate(_ nanoseconds: Int64) -> String {
    var t = time_t(nanoseconds / 1_000_000_000)
    var parts = tm()
    gmtime_r(&t, &parts)
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    return
        "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
}

/// One progress line on standard error, rewritten in place, only when it is a terminal (and not
/// with --quiet): the phase, and rclone's transfer statistics (bytes, rate, time left).
final class ProgressLine {
    let active: Bool
    private var shown = false

    init(quiet: Bool) { active = !quiet && standardErrorIsTerminal }

    func show(_ text: String) {
        guard active else { return }
        printError("\r\(text.prefix(120))\u{1B}[K", newline: false)
        shown = true
    }

    func clear() {
        guard active, shown else { return }
        printError("\r\u{1B}[K", newline: false)
        shown = false
    }
}
