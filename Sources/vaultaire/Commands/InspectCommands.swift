import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

enum InfoCommand {
    static let spec = CommandSpec(
        name: "info",
        overview: "Show a vault's format version, KDF parameters and blob count; with --unlock, also its files.",
        usage: "vaultaire info <vault> [--unlock]",
        arguments: [("<vault>", "The vault directory.")],
        options: [
            .init(long: "unlock", short: nil, valueName: nil, help: "Unlock to show file names and counts."),
            CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[0]
        let layout = VaultLayout(root: path)
        let header = try readVaultHeader(path)
        print("Vault:               \(path)")
        print(
            "Format version:      \(header.version)\(header.version < VaultHeader.formatVersion ? " (upgraded to \(VaultHeader.formatVersion) by the next writable open or 'vaultaire upgrade')" : "")"
        )
        print("Vault ID:            \(header.vaultID.hex)")
        print("Device slots:        \(header.slots.count) ('vaultaire device list')")
        for slot in header.slots {
            print(
                "  \(slot.name.isEmpty ? "(unnamed)" : slot.name): \(describeKind(slot)), PBKDF2-HMAC-SHA512 \(slot.iterations) iterations, salt ID \(slot.saltID.hex)"
            )
        }
        print("Recovery KDF:        PBKDF2-HMAC-SHA512, \(header.recovery.iterations) iterations")
        if let weak = WeakKDFWarning.shortfall(header) {
            print("KDF strength:        WEAK — BELOW THE FLOORS: \(weak); made for tests, cheap to attack")
        } else {
            print(
                "KDF strength:        at or above the floors (\(KDFPolicy.vaultIterations) / \(KDFPolicy.recoveryIterations))"
            )
        }
        print("Cipher:              AES-256-GCM, \(header.chunkSize / 1024) KiB chunks")
        print("Blobs:               \(try layout.blobIDsOnDisk().count)")
        guard args.has("unlock") else { return }
        let vault = try openVault(args, readOnly: true)
        defer { try? vault.close() }
        let files = vault.fileCount
        print("Index generation:    \(vault.generation)")
        print("Entries:             \(files - 1) (files, directories and links)")
        for (name, node) in try vault.list(Inode.rootID) {
            print("  \(name)\(node.kind == .directory ? "/" : "")")
        }
    }
}

enum VerifyCommand {
    static let spec = CommandSpec(
        name: "verify",
        overview:
            "Authenticate every index record, file header and chunk; name every damaged file and sync conflict copy.",
        usage: "vaultaire verify <vault> [--repair [--new-recovery-phrase-out <file>]] [--recovery-phrase-file <file>]",
        arguments: [("<vault>", "The vault directory.")],
        options: [
            .init(
                long: "repair", short: nil, valueName: nil,
                help:
                    "Also remove blobs that no file names (left by an interrupted create) and rewrite a damaged vault.header's checksum and MAC (once the recovery phrase shows its recovery envelope intact, or with --new-recovery-phrase-out); needs the vault not to be in use."
            ),
            .init(
                long: "recovery-phrase-file", short: nil, valueName: "file",
                help:
                    "Check the recovery phrase in FILE against the recovery envelope; without --passphrase-file the vault is unlocked with it."
            ),
            .init(
                long: "new-recovery-phrase-out", short: nil, valueName: "file",
                help:
                    "With --repair: seal the master key under a new recovery phrase, written to FILE (mode 0600, a new file), replacing a recovery envelope that is damaged or whose phrase is lost."
            ),
            CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback, CommonOptions.quiet,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[0]
        let repair = args.has("repair")
        if args.value("new-recovery-phrase-out") != nil && !repair {
            throw CLIError.usage("--new-recovery-phrase-out needs --repair", command: "verify")
        }
        let keychain = try selectKeychain(args)
        let header = try readVaultHeader(path)
        var phrase: SecureBytes?
        if args.value("recovery-phrase-file") != nil {
            let bytes = try SecretInput.obtain(
                args, fileOption: "recovery-phrase-file", prompt: "Recovery phrase: ", confirm: false)
            defer { bytes.wipe() }
            // The phrase must pass through a String for Unicode normalization; see RecoveryPhrase.
            phrase = try RecoveryPhrase.validate(
                bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }, words: try Wordlist.load())
        }
        defer { phrase?.wipe() }
        let master: SecureBytes
        var phraseChecked = false
        // Whether an envelope of this header (this device's slot, or the recovery envelope) opened to
        // the master key: a remembered key alone shows nothing of the header's own parameters.
        var envelopeOpened = false
        if let phrase, args.value("passphrase-file") == nil, args.value("extpass") == nil {
            master = try header.unlock(recoveryPhrase: phrase)
            phraseChecked = true
        } else {
            let (key, credential) = try obtainMasterKey(args, vault: path, keychain: keychain)
            master = key
            envelopeOpened = credential != nil
        }
        defer { master.wipe() }
        // Whether the recovery envelope opens to this master key: nil when no phrase was given.
        var recoveryOpens: Bool? = phraseChecked ? true : nil
        if let phrase, !phraseChecked {
            let opened = try? header.unlock(recoveryPhrase: phrase)
            defer { opened?.wipe() }
            recoveryOpens = opened.map { $0.constantTimeEquals(master) } ?? false
            phraseChecked = recoveryOpens == true
        }
        var headerDamage: String?
        if !header.isAuthentic(master: master) {
            headerDamage = "fails its checksum or MAC (damaged or altered)"
            if recoveryOpens == false {
                headerDamage! += "; the recovery envelope does not open with this recovery phrase"
            }
        } else if recoveryOpens == false {
            // The MAC vouches for the recovery envelope's bytes: if it holds, the phrase is wrong.
            throw CLIError.message("the recovery phrase does not open this vault's recovery envelope", .wrongCredential)
        }
        if repair && (headerDamage != nil || args.value("new-recovery-phrase-out") != nil) {
            // A header whose vault ID or chunk size was changed still yields a remembered key, while
            // every envelope fails: resealing it would make the MAC vouch for the wrong parameters.
            guard envelopeOpened || phraseChecked else {
                throw CLIError.message(
                    "vault.header was not rewritten: a remembered master key alone does not show the header's "
                        + "parameters intact; give the credential (--passphrase-file) or the recovery phrase "
                        + "(--recovery-phrase-file)", .credentialUnavailable)
            }
            try repairHeader(args, vault: path, master: master, recoveryOpens: recoveryOpens, damage: headerDamage)
            headerDamage = nil
        }
        let vault = try VaultAccess.open(
            at: path, master: master.slice(0..<master.count), keychain: keychain, readOnly: !repair,
            acceptRollback: args.has("accept-rollback"), settlingNewerBlobs: repair)
        reportOpening(vault, headerWarning: false)
        defer { try? vault.close() }
        var progress: ProgressMeter?
        var checked = 0
        let report = vault.verify { done, total in
            if progress == nil { progress = ProgressMeter(total: total, unit: .files, quiet: args.has("quiet")) }
            progress?.update(done)
            checked = done
        }
        progress?.finish(checked)
        for notice in report.notices { printError("Notice: \(notice)") }
        if repair && !(report.strayBlobs.isEmpty && report.orphanedThumbnails.isEmpty) {
            let done = try vault.removeStrayBlobs(report.strayBlobs + report.orphanedThumbnails)
            printError("Repaired: removed \(done.removed) empty blob(s) and thumbnail(s) that belonged to no file")
            if done.setAside > 0 {
                printError(
                    "Repaired: moved \(done.setAside) blob(s) with contents that belonged to no file to "
                        + "\(path)/lost+found/ (nothing deleted; README: \"Using a vault in a sync folder\")")
            }
        }
        // A writable open refuses conflict copies, so what a repair finds is only blobs newer than the
        // index: those no record names went to lost+found/ above, the others are set aside here.
        let conflicts = repair ? [] : vault.syncConflicts
        if repair {
            let (settled, lost) = try vault.settleNewerBlobs()
            for notice in lost { printError("Notice: \(notice)") }
            if settled > 0 {
                printError(
                    "Repaired: copied \(settled) file(s) newer than the index to \(path)/lost+found/ (their "
                        + "blob ID + .newer-than-index); each file keeps what of it matches the index")
            }
        }
        for (path, reason) in report.damaged.sorted(by: { $0.path < $1.path }) {
            print("DAMAGED \(path): \(reason)")
        }
        if let headerDamage { print("DAMAGED vault.header: \(headerDamage)") }
        for copy in conflicts { print("CONFLICT \(copy.path): \(copy.holds)") }
        if let weak = WeakKDFWarning.shortfall(vault.header) {
            print("WEAK vault.header: key derivation below the floors: \(weak)")
        }
        let damaged = report.damaged.count + (headerDamage == nil ? 0 : 1)
        print(
            "Checked the index, \(report.filesChecked) files and \(report.chunksChecked) chunks\(phraseChecked ? " and the recovery phrase" : ""): \(damaged == 0 ? "all intact" : "\(damaged) damaged")."
        )
        // Damage is the graver finding and keeps its code; conflict copies alone have their own.
        if damaged > 0 { throw CLIError.message("\(damaged) item(s) damaged", .damaged) }
        if !conflicts.isEmpty {
            throw CLIError.message(
                "the vault was written on two machines at once: \(SyncConflictCopy.summary(conflicts)) "
                    + "(CONFLICT above); nothing is lost, but writing is refused until they are resolved (README: "
                    + "\"Using a vault in a sync folder\")",
                .syncConflict)
        }
    }
}

extension VerifyCommand {
    /// Rewrites a damaged header's checksum and MAC only when nothing it vouches for is left unchecked:
    /// the recovery envelope, which the credential cannot check, must open with the recovery phrase —
    /// or be replaced by one for a new phrase (`--new-recovery-phrase-out`). Otherwise refuses, so the
    /// MAC never comes to vouch for an envelope that no longer opens.
    static func repairHeader(
        _ args: ParsedArguments, vault path: String, master: SecureBytes, recoveryOpens: Bool?, damage: String?
    ) throws {
        if let out = args.value("new-recovery-phrase-out") {
            let wordlist = try Wordlist.load()
            let phrase = try RecoveryPhrase.generate(words: wordlist)
            // The phrase is durable before the envelope it opens replaces the old one: a crash between
            // leaves the old envelope and a phrase file that does not open it yet, never the reverse.
            // Refused before the file is made when the vault is busy or holds conflict copies.
            try VaultAccess.checkWritable(at: path)
            try writeNewRecoveryPhrase(phrase, to: out)
            do {
                try VaultAccess.replaceRecoveryEnvelope(at: path, master: master, phrase: phrase, wordlist: wordlist)
            } catch {
                // A phrase that opens nothing must not be left to be trusted.
                _ = unlink(out)
                throw error
            }
            printError(
                "\(damage == nil ? "Done" : "Repaired"): vault.header's recovery envelope replaced and its checksum and MAC rewritten; the new "
                    + "recovery phrase is in \(out) (move it somewhere safe, off this machine); the old phrase no "
                    + "longer opens this vault")
            return
        }
        guard let damage else { return }
        guard recoveryOpens == true else {
            let why =
                recoveryOpens == nil
                ? "the damage may be in the recovery envelope, which only the recovery phrase can check: "
                    + "give it with --recovery-phrase-file FILE"
                : "its recovery envelope does not open with this recovery phrase (a wrong phrase, or the damage is there)"
            throw CLIError.message(
                "vault.header \(damage) and was not repaired: \(why); or replace the recovery envelope "
                    + "with --new-recovery-phrase-out FILE (a new recovery phrase, written to FILE)",
                .damaged)
        }
        try VaultAccess.repairHeader(at: path, master: master)
        printError(
            "Repaired: vault.header's checksum and MAC rewritten; its slots are kept as they were and its recovery "
                + "envelope opens with the recovery phrase")
    }

    /// Creates the local file `path` (mode 0600, never an existing one) holding `phrase`, synced.
    static func writeNewRecoveryPhrase(_ phrase: String, to path: String) throws {
        let file: FileDescriptor
        do { file = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600) } catch {
            throw CLIError.message(
                "cannot create the local recovery phrase file: \(error)",
                localExitCode((error as? SystemError)?.errno ?? EIO))
        }
        try file.write(Array((phrase + "\n").utf8), at: 0)
        try file.sync()
    }
}

enum KDFBenchCommand {
    static let spec = CommandSpec(
        name: "kdf-bench",
        overview: "Measure one PBKDF2-HMAC-SHA512 derivation here, and what it means for an attacker.",
        usage: "vaultaire kdf-bench",
        arguments: [], options: [], minimumPositionals: 0, maximumPositionals: 0)

    static func run(_ args: ParsedArguments) throws {
        let password = SecureBytes(copying: Array("kdf-bench sample credential".utf8))
        let salt = try SecureRandom.bytes(32)
        print("PBKDF2-HMAC-SHA512 on this machine, one core (median of 3):")
        for (label, iterations) in [("vault", KDFPolicy.vaultIterations), ("recovery", KDFPolicy.recoveryIterations)] {
            var times: [Double] = []
            for _ in 0..<3 {
                let start = MonotonicClock.seconds()
                _ = try PBKDF2.deriveSHA512(password: password, salt: salt, iterations: iterations)
                times.append(MonotonicClock.seconds() - start)
            }
            let t = times.sorted()[1]
            let perSecond = 1 / t
            let days = 1e9 * t / 86_400
            print(
                "  \(label.padding(9)) \(iterations) iterations: \(String(format3(t * 1000))) ms per guess, \(String(format3(perSecond))) guesses/s, \(String(format3(days))) days for 10^9 guesses"
            )
        }
        print("An attacker with many cores or GPUs divides these times by their parallelism; a credential")
        print("drawn from 10^9 likely choices is not safe. A 4×4 pattern of 4–16 distinct cells has about 5.7×10^13")
        print("possibilities in all, but people draw from a small, predictable part of them.")
    }
}

/// A number with three significant decimals, without Foundation's formatter.
func format3(_ v: Double) -> String {
    if v >= 100 { return String(Int(v.rounded())) }
    let scaled = (v * 1000).rounded() / 1000
    return String(scaled)
}

func printError(_ text: String, newline: Bool) {
    StandardError.write(newline ? text + "\n" : text)
}
