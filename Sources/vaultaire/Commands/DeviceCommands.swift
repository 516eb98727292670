import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

/// `vaultaire device list|remove`: the vault's device slots, one credential envelope per device salt.
enum DeviceCommand {
    static let spec = CommandSpec(
        name: "device",
        overview: "List the devices enrolled in a vault (their slots), or remove one.",
        usage: "vaultaire device list <vault> | vaultaire device remove <vault> <name|salt-id>",
        arguments: [
            (
                "list",
                "Show each slot: name, salt ID, credential kind, KDF cost, when it was added; '*' marks this device."
            ),
            (
                "remove",
                "Remove the slot named NAME (or with that salt ID); never the last one. Asks for the credential."
            ),
            ("<vault>", "The vault directory."),
            ("<name|salt-id>", "For remove: the slot's device name or its salt ID (16 hex digits)."),
        ],
        options: [CommonOptions.passphraseFile, CommonOptions.extpass, CommonOptions.keychain],
        minimumPositionals: 2, maximumPositionals: 3)

    static func run(_ args: ParsedArguments) throws {
        let action = args.positionals[0]
        switch action {
        case "list":
            guard args.positionals.count == 2 else {
                throw CLIError.usage("device list takes one <vault>", command: spec.name)
            }
            try list(args.positionals[1], args)
        case "remove":
            guard args.positionals.count == 3 else {
                throw CLIError.usage("device remove takes <vault> and <name|salt-id>", command: spec.name)
            }
            try remove(args.positionals[1], args.positionals[2], args)
        default:
            throw CLIError.usage("unknown device action '\(action)' (list or remove)", command: spec.name)
        }
    }

    static func list(_ path: String, _ args: ParsedArguments) throws {
        let header = try readVaultHeader(path)
        let keychain = try? selectKeychain(args)
        let here = (try? keychain?.deviceSalt(create: false)).flatMap { $0 }.flatMap { try? VaultHeader.saltID(of: $0) }
        print("  NAME                             SALT ID           CREDENTIAL     KDF ITERATIONS  ADDED (UTC)")
        for slot in header.slots {
            let mark = here.map { $0 == slot.saltID } == true ? "*" : " "
            let name = slot.name.isEmpty ? "(from format version 1)" : slot.name
            print(
                "\(mark) \(name.padding(32)) \(slot.saltID.hex)  \(describeKind(slot).padding(13))  \(String(slot.iterations).leftPadded(14))  \(slot.added == 0 ? "-" : utcDate(slot.added * 1_000_000_000))"
            )
        }
        if header.version < VaultHeader.formatVersion {
            print("(format version \(header.version): one slot; 'vaultaire upgrade' makes room for more)")
        }
    }

    static func remove(_ path: String, _ nameOrID: String, _ args: ParsedArguments) throws {
        let keychain = try selectKeychain(args)
        try VaultAccess.checkWritable(at: path)
        let (master, _) = try obtainMasterKey(args, vault: path, keychain: keychain)
        defer { master.wipe() }
        try upgradeIfNeeded(path, master: master, keychain: keychain)
        let removed = try VaultAccess.removeDevice(at: path, master: master, nameOrID: nameOrID)
        print(
            "Removed the slot of '\(removed.name)' (salt ID \(removed.saltID.hex)): that device can no longer open the vault "
                + "with its credential (a master key it remembers still opens it until 'vaultaire forget' there).")
    }
}

/// How a slot's credential is described: "passphrase" or "pattern 4×4".
func describeKind(_ slot: VaultHeader.DeviceSlot) -> String {
    slot.kind == .pattern ? "pattern \(slot.patternColumns)×\(slot.patternRows)" : "passphrase"
}

/// Opens the vault for writing once and locks it again, which migrates a version-1 vault.
func upgradeIfNeeded(_ path: String, master: SecureBytes, keychain: Keychain) throws {
    guard try VaultAccess.readHeader(at: path).version < VaultHeader.formatVersion else { return }
    let vault = try VaultAccess.open(
        at: path, master: master.slice(0..<master.count), keychain: keychain, readOnly: false)
    reportOpening(vault)
    try vault.close()
}

/// `vaultaire upgrade`: migrates a vault to the current format version in place; with `--compact`
/// also rewrites every file still in the version-1 blob layout (or whose content key has sealed its
/// budget) into the current one.
enum UpgradeCommand {
    static let spec = CommandSpec(
        name: "upgrade",
        overview:
            "Migrate a vault to the current format version in place (also done by the first writable open); --compact also rewrites old blobs.",
        usage: "vaultaire upgrade <vault> [--compact]",
        arguments: [("<vault>", "The vault directory.")],
        options: [
            .init(
                long: "compact", short: nil, valueName: nil,
                help:
                    "Also rewrite every file kept in the version-1 blob layout (a small file then takes one host block) or whose key is due for rotation; files open elsewhere are left for the next run."
            ),
            CommonOptions.passphraseFile, CommonOptions.extpass, CommonOptions.keychain, CommonOptions.acceptRollback,
            CommonOptions.quiet,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[0]
        let before = try readVaultHeader(path).version
        try VaultAccess.checkWritable(at: path)
        try withOpenVault(args, readOnly: false) { vault in
            guard args.has("compact") else { return }
            var progress: ProgressMeter?
            var last = 0
            let rewritten = try vault.rewriteBlobs { done, total in
                if progress == nil { progress = ProgressMeter(total: total, unit: .files, quiet: args.has("quiet")) }
                progress?.update(done)
                last = done
            }
            progress?.finish(last)
            print("Rewrote \(rewritten) file(s) into the current blob layout.")
        }
        if before < VaultHeader.formatVersion {
            print("Upgraded \(path) from format version \(before) to \(VaultHeader.formatVersion).")
        } else {
            print("\(path) is at format version \(VaultHeader.formatVersion).")
        }
    }
}
