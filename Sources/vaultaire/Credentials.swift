import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

/// The options every command that unlocks shares.
enum CommonOptions {
    static let passphraseFile = CommandSpec.Option(
        long: "passphrase-file", short: nil, valueName: "file",
        help:
            "Read the credential from FILE, a pipe or a FIFO ('-': standard input) to its end; one trailing newline is stripped."
    )
    static let extpass = CommandSpec.Option(
        long: "extpass", short: nil, valueName: "command",
        help:
            "Run COMMAND with /bin/sh -c and take the credential from its standard output (one trailing newline stripped)."
    )
    static let keychain = CommandSpec.Option(
        long: "keychain", short: nil, valueName: "backend",
        help: "Keychain backend: secret-service or file (or VAULTAIRE_KEYCHAIN).")
    static let acceptRollback = CommandSpec.Option(
        long: "accept-rollback", short: nil, valueName: nil,
        help: "Accept an older copy of the vault (restored on purpose) once the credential is verified.")
    static let remember = CommandSpec.Option(
        long: "remember", short: nil, valueName: nil,
        help: "Remember the master key in the keychain for credential-free unlocks on this machine.")
    static let deviceName = CommandSpec.Option(
        long: "device-name", short: nil, valueName: "name",
        help: "Name this device's slot NAME (default: the host name), as 'vaultaire device list' shows it.")
}

/// Refuses a device name the header cannot hold, before anything is asked.
func checkDeviceName(_ name: String, command: String) throws {
    guard !name.isEmpty, name.utf8.count <= VaultHeader.maximumDeviceName,
        !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
    else {
        throw CLIError.usage(
            "--device-name must be 1 to \(VaultHeader.maximumDeviceName) bytes without control characters",
            command: command)
    }
}

/// Builds a credential of `kind` from secret bytes; patterns are parsed from their text form.
func makeCredential(
    _ secret: SecureBytes, kind: Credential.Kind, rows: Int = 4, columns: Int = 4
) throws -> (Credential, Pattern?) {
    switch kind {
    case .passphrase:
        return (Credential.passphrase(secret), nil)
    case .pattern:
        // The pattern's text passes through a String here; patterns are low-entropy by nature and the
        // canonical bytes that reach the KDF are secure storage.
        let text = secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let pattern = try Pattern(text: text, rows: rows, columns: columns)
        return (Credential.pattern(pattern), pattern)
    }
}

/// Reads the current credential for this device's slot, whose kind (passphrase or pattern) the
/// header says. A device without a slot is refused before anything is asked (`deviceMismatch`),
/// unless the header is damaged: then the slot may be there under a damaged salt ID, and the first
/// slot's kind is asked for. A header a remembered master key does not authenticate is damaged too,
/// its checksum recomputed or not.
func currentCredential(
    _ args: ParsedArguments, header: VaultHeader, keychain: Keychain, fileOption: String = "passphrase-file"
) throws -> Credential {
    let slot = try thisDeviceSlot(header, keychain: keychain)
    let secret = try SecretInput.obtain(
        args, fileOption: fileOption,
        prompt: slot.kind == .pattern ? "Pattern (e.g. a1-b2-c3-d4): " : "Passphrase: ", confirm: false)
    return try makeCredential(
        secret, kind: slot.kind, rows: Int(slot.patternRows), columns: Int(slot.patternColumns)
    ).0
}

/// This device's slot in `header` (see `currentCredential`).
func thisDeviceSlot(_ header: VaultHeader, keychain: Keychain) throws -> VaultHeader.DeviceSlot {
    let salt: SecureBytes?
    do { salt = try keychain.deviceSalt(create: false) } catch KeychainError.notFound { salt = nil }
    if let salt, let index = header.slotIndex(saltID: try VaultHeader.saltID(of: salt)) {
        return header.slots[index]
    }
    guard !header.checksumMatches, let first = header.slots.first else {
        if VaultAccess.failsRememberedMAC(header, keychain: keychain) {
            throw FormatError.damaged(HeaderDamage.slotMessage)
        }
        throw FormatError.deviceMismatch
    }
    return first
}

/// Reads a new credential (twice on a terminal) and checks its strength.
func newCredential(_ args: ParsedArguments, fileOption: String, pattern: Bool) throws -> (Credential, Pattern?) {
    let secret = try SecretInput.obtain(
        args, fileOption: fileOption,
        prompt: pattern ? "New pattern (e.g. a1-b2-c3-d4): " : "New passphrase: ", confirm: true)
    let (credential, p) = try makeCredential(secret, kind: pattern ? .pattern : .passphrase)
    try credential.checkStrength()
    return (credential, p)
}

/// The master key: remembered in the keychain when it is there (unless `requireCredential`), else
/// from the credential (which is returned too, for callers that need it beyond unlocking).
func obtainMasterKey(
    _ args: ParsedArguments, vault path: String, keychain: Keychain, requireCredential: Bool = false
) throws -> (master: SecureBytes, credential: Credential?) {
    let header = try readVaultHeader(path)
    if !requireCredential && args.value("passphrase-file") == nil && args.value("extpass") == nil {
        do { return (try keychain.getMasterKey(for: header.vaultID), nil) } catch KeychainError.notFound {
            // Not remembered: ask for the credential.
        }
    }
    let credential = try currentCredential(args, header: header, keychain: keychain)
    return (try VaultAccess.unwrapMasterKey(at: path, credential: credential, keychain: keychain), credential)
}

/// Unlocks and opens a vault, printing any recovery notices on stderr. `credentialUsed` sees the
/// credential when one was typed or read (not for a remembered key).
func openVault(
    _ args: ParsedArguments, readOnly: Bool, credentialUsed: ((Credential) -> Void)? = nil
) throws -> UnlockedVault {
    let path = args.positionals[0]
    let keychain = try selectKeychain(args)
    let (master, credential) = try obtainMasterKey(args, vault: path, keychain: keychain)
    if let credential { credentialUsed?(credential) }
    let vault = try VaultAccess.open(
        at: path, master: master, keychain: keychain, readOnly: readOnly,
        acceptRollback: args.has("accept-rollback"))
    reportOpening(vault)
    return vault
}

/// What opening found: repairs as notices, an accepted rollback as a warning.
func reportOpening(_ vault: UnlockedVault, headerWarning: Bool = true) {
    if let (seen, found) = vault.acceptedRollback {
        printError(
            "Warning: accepted an older copy of the vault: this device had seen generation \(seen), this copy holds "
                + "\(found); changes made after the copy was taken are not in it")
    }
    if headerWarning && vault.headerDamaged { printError("Warning: \(HeaderDamage.message)") }
    for notice in vault.notices { printError("Notice: \(notice)") }
    if let warning = syncConflictWarning(vault.syncConflicts) { printError(warning) }
}

/// One line for a read-only open of a vault holding sync conflict copies (a writable one refuses).
func syncConflictWarning(_ copies: [SyncConflictCopy]) -> String? {
    guard let first = copies.first else { return nil }
    if copies.allSatisfy({ $0.kind == .conflictCopy }) {
        let which = copies.count == 1 ? "a conflict copy (\(first.path))" : "\(copies.count) conflict copies"
        return "Warning: this vault was written on two machines at once: a sync client left \(which) beside its "
            + "files; reading works, writing is refused until resolved ('vaultaire verify' lists them)"
    }
    return "Warning: this vault was written on two machines at once: the sync folder holds "
        + "\(SyncConflictCopy.summary(copies)) (a sync client may still be bringing the other machine's index); "
        + "reading works, writing is refused until resolved ('vaultaire verify' lists them)"
}

/// Unlocks, runs `body`, then locks: a failure to persist at lock is reported like any other error.
func withOpenVault(_ args: ParsedArguments, readOnly: Bool, _ body: (UnlockedVault) throws -> Void) throws {
    let vault = try openVault(args, readOnly: readOnly)
    do { try body(vault) } catch {
        try? vault.close()
        throw error
    }
    try vault.close()
}

/// Picks the keychain backend: `--keychain`, else VAULTAIRE_KEYCHAIN, else the Secret Service.
func selectKeychain(_ args: ParsedArguments) throws -> Keychain {
    let choice = args.value("keychain") ?? FileSystem.environment("VAULTAIRE_KEYCHAIN") ?? "secret-service"
    switch choice {
    case "file":
        return Keychain(backend: FileKeychain(directory: try FileKeychain.defaultDirectory()))
    case "secret-service":
        return Keychain(backend: try secretServiceBackend())
    default:
        throw CLIError.usage("unknown keychain '\(choice)' (use secret-service or file)", command: nil)
    }
}
