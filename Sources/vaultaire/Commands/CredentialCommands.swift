import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain

enum PasswdCommand {
    static let spec = CommandSpec(
        name: "passwd",
        overview:
            "Set a new credential for this device. Only this device's slot changes: other devices keep theirs, and no file is re-encrypted.",
        usage: "vaultaire passwd <vault> [--passphrase-file <file>] [--new-passphrase-file <file>] [--pattern]",
        arguments: [("<vault>", "The vault directory.")],
        options: [
            CommonOptions.passphraseFile,
            .init(
                long: "new-passphrase-file", short: nil, valueName: "file", help: "Read the new credential from FILE."),
            .init(long: "pattern", short: nil, valueName: nil, help: "The new credential is a pattern."),
            .init(
                long: "kdf-iterations", short: nil, valueName: "n", help: "New PBKDF2 iteration count (default: keep)."),
            CommonOptions.remember, CommonOptions.keychain,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[0]
        let keychain = try selectKeychain(args)
        let header = try readVaultHeader(path)
        try VaultAccess.checkWritable(at: path)
        let current = try currentCredential(args, header: header, keychain: keychain)
        let master = try VaultAccess.unwrapMasterKey(at: path, credential: current, keychain: keychain)
        defer { master.wipe() }
        let (credential, pattern) = try newCredential(
            args, fileOption: "new-passphrase-file", pattern: args.has("pattern"))
        let iterations = try args.value("kdf-iterations").map { _ in
            try args.integer("kdf-iterations", default: 0, command: spec.name)
        }
        try VaultAccess.setCredential(
            at: path, master: master, credential: credential, pattern: pattern, keychain: keychain,
            iterations: iterations)
        try keepRememberedKeyConsistent(args, keychain: keychain, vaultID: header.vaultID, master: master)
        let others = header.slots.count - 1
        print("Credential changed for this device.")
        if others > 0 {
            print(
                "The vault's \(others) other device slot\(others == 1 ? "" : "s") keep\(others == 1 ? "s" : "") the credential "
                    + "\(others == 1 ? "it has" : "they have") until it is changed on \(others == 1 ? "that device" : "those devices") "
                    + "or the slot is removed ('vaultaire device list', 'vaultaire device remove')."
            )
        }
    }
}

enum RecoverCommand {
    static let spec = CommandSpec(
        name: "recover",
        overview:
            "Open the vault with its recovery phrase and set a new credential for this device: its slot is rewritten, or added on a new machine.",
        usage:
            "vaultaire recover <vault> [--recovery-phrase-file <file>] [--new-passphrase-file <file>] [--pattern] [--device-name <name>]",
        arguments: [("<vault>", "The vault directory.")],
        options: [
            .init(
                long: "recovery-phrase-file", short: nil, valueName: "file", help: "Read the recovery phrase from FILE."
            ),
            .init(
                long: "new-passphrase-file", short: nil, valueName: "file", help: "Read the new credential from FILE."),
            .init(long: "pattern", short: nil, valueName: nil, help: "The new credential is a pattern."),
            CommonOptions.deviceName, CommonOptions.remember, CommonOptions.keychain,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[0]
        let keychain = try selectKeychain(args)
        let header = try readVaultHeader(path)
        try VaultAccess.checkWritable(at: path)
        let deviceName = args.value("device-name")
        if let deviceName { try checkDeviceName(deviceName, command: spec.name) }
        let phraseBytes = try SecretInput.obtain(
            args, fileOption: "recovery-phrase-file", prompt: "Recovery phrase: ", confirm: false)
        // The phrase must pass through a String for Unicode normalization; see RecoveryPhrase.
        let phrase = phraseBytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let master = try VaultAccess.recoverMasterKey(at: path, phrase: phrase, wordlist: try Wordlist.load())
        defer { master.wipe() }
        let (credential, pattern) = try newCredential(
            args, fileOption: "new-passphrase-file", pattern: args.has("pattern"))
        let damaged = !header.isAuthentic(master: master)
        let hadSlot = try VaultAccess.setCredential(
            at: path, master: master, credential: credential, pattern: pattern, keychain: keychain,
            deviceName: deviceName, repairingHeader: true)
        if damaged {
            printError(
                "Notice: vault.header was damaged or altered; it is rewritten with this device's new slot, "
                    + "the recovery envelope and the other slots as they were ('vaultaire verify' checks the rest)")
        }
        try keepRememberedKeyConsistent(args, keychain: keychain, vaultID: header.vaultID, master: master)
        if hadSlot {
            print("Vault recovered; the new credential is set in this device's slot.")
        } else {
            print(
                "Vault recovered; this device is enrolled with its own slot and the new credential. "
                    + "The other devices' slots are unchanged.")
        }
    }
}

enum ForgetCommand {
    static let spec = CommandSpec(
        name: "forget", overview: "Delete the vault's remembered master key from the keychain (no error if none).",
        usage: "vaultaire forget <vault>",
        arguments: [("<vault>", "The vault directory.")],
        options: [CommonOptions.keychain],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let header = try readVaultHeader(args.positionals[0])
        try selectKeychain(args).deleteMasterKey(for: header.vaultID)
        print("Forgotten: the next unlock on this machine asks for the credential.")
    }
}

/// A remembered key stays valid across passwd/recover (the master key does not change); `--remember`
/// adds it, and a stale copy is refreshed.
func keepRememberedKeyConsistent(
    _ args: ParsedArguments, keychain: Keychain, vaultID: [UInt8], master: SecureBytes
) throws {
    if args.has("remember") || (try? keychain.hasMasterKey(for: vaultID)) == true {
        try keychain.storeMasterKey(master, for: vaultID)
    }
}
