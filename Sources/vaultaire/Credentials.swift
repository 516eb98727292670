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

/// Reads the current credential for a vault whose header says which kind it is.
func currentCredential(
    _ args: ParsedArguments, header: VaultHeader, fileOption: String = "passphrase-file"
) throws -> Credential {
    let kind = header.credential.kind
    let secret = try SecretInput.obtain(
        args, fileOption: fileOption,
        prompt: kind == .pattern ? "Pattern (e.g. a1-b2-c3-d4): " : "Passphrase: ", confirm: false)
    return try makeCredential(
        secret, kind: kind, rows: Int(header.credential.patternRows), columns: Int(header.credential.patternColumns)
    ).0
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

/// The master key: remembered in the keychain when it is there, else from the credential (which is
/// returned too, for callers that check more envelopes with it).
func obtainMasterKey(
    _ args: ParsedArguments, vault path: String, keychain: Keychain
) throws -> (master: SecureBytes, credential: Credential?) {
    let header = try readVaultHeader(path)
    if args.value("passphrase-file") == nil && args.value("extpass") == nil {
        do { return (try keychain.getMasterKey(for: header.vaultID), nil) } catch KeychainError.notFound {
            // Not remembered: ask for the credential.
        }
    }
    let credential = try currentCredential(args, header: header)
    do {
        return (try VaultAccess.unwrapMasterKey(at: path, credential: credential, keychain: keychain), credential)
    } catch FormatError.wrongCredential {
        // If the backup envelope opens with the same credential, the credential is right and the
        // credential envelope is what is wrong: say so, instead of sending the owner guessing.
        if let master = try? header.unlockWithBackupKey(credential: credential) {
            master.wipe()
            throw FormatError.damaged(
                "vault.header: the credential envelope fails authentication although the credential is "
                    + "right; open the vault with 'vaultaire recover' (the recovery phrase) to rewrite it")
        }
        throw FormatError.wrongCredential
    }
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
func reportOpening(_ vault: UnlockedVault) {
    if let (seen, found) = vault.acceptedRollback {
        printError(
            "Warning: accepted an older copy of the vault: this device had seen generation \(seen), this copy holds "
                + "\(found); changes made after the copy was taken are not in it")
    }
    for notice in vault.notices { printError("Notice: \(notice)") }
    if let warning = syncConflictWarning(vault.syncConflicts) { printError(warning) }
}

/// One line for a read-only open of a vault holding sync conflict copies (a writable one refuses).
func syncConflictWarning(_ copies: [SyncConflictCopy]) -> String? {
    guard let first = copies.first else { return nil }
    let which = copies.count == 1 ? "a conflict copy (\(first.path))" : "\(copies.count) conflict copies"
    return "Warning: this vault was written on two machines at once: a sync client left \(which) beside its files; "
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
