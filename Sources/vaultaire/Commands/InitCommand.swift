import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

enum InitCommand {
    static let spec = CommandSpec(
        name: "init", overview: "Create a new encrypted vault.",
        usage: "vaultaire init <vault> [--pattern] [--passphrase-file <file>] [--recovery-phrase-out <file>]",
        arguments: [("<vault>", "Directory to create the vault in (absent or empty).")],
        options: [
            CommonOptions.passphraseFile,
            .init(
                long: "pattern", short: nil, valueName: nil,
                help: "Use a pattern on a 4×4 grid (a1-b2-c3-d4) instead of a passphrase."),
            .init(
                long: "recovery-phrase-out", short: nil, valueName: "file",
                help: "Write the recovery phrase to FILE (mode 0600) instead of printing it."),
            .init(
                long: "kdf-iterations", short: nil, valueName: "n",
                help: "PBKDF2 iterations for the vault key (default 600000)."),
            .init(
                long: "recovery-iterations", short: nil, valueName: "n",
                help: "PBKDF2 iterations for the recovery key (default 800000)."),
            .init(
                long: "chunk-size", short: nil, valueName: "KiB",
                help: "Content chunk size: 4, 8, 16, 32, 64 … 1024 KiB (default 4)."),
            CommonOptions.deviceName, CommonOptions.remember, CommonOptions.keychain,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[0]
        var options = VaultAccess.CreateOptions()
        options.iterations = try args.integer("kdf-iterations", default: options.iterations, command: spec.name)
        options.recoveryIterations = try args.integer(
            "recovery-iterations", default: options.recoveryIterations, command: spec.name)
        if let kib = args.value("chunk-size") {
            guard let k = Int(kib), k >= 4, k <= 1024, k & (k - 1) == 0 else {
                throw CLIError.usage(
                    "--chunk-size must be a power of two from 4 to 1024 (KiB), got '\(kib)'", command: spec.name)
            }
            options.chunkSizeLog2 = UInt8(k.trailingZeroBitCount + 10)
        }
        if let name = args.value("device-name") {
            try checkDeviceName(name, command: spec.name)
            options.deviceName = name
        }
        try KDFPolicy.check(options.iterations, minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        try KDFPolicy.check(options.recoveryIterations, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        let keychain = try selectKeychain(args)
        // Open the recovery output first, so a bad path fails before any key work.
        var phraseOut: FileDescriptor?
        if let out = args.value("recovery-phrase-out") {
            do { phraseOut = try FileDescriptor(path: out, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600) } catch {
                throw CLIError.message(
                    "cannot create the local recovery phrase file: \(error)",
                    localExitCode((error as? SystemError)?.errno ?? EIO))
            }
        }
        let (credential, pattern) = try newCredential(args, fileOption: "passphrase-file", pattern: args.has("pattern"))
        let wordlist = try Wordlist.load()
        let (phrase, master) = try VaultAccess.create(
            at: path, credential: credential, pattern: pattern, keychain: keychain,
            options: options, wordlist: wordlist)
        let header = try readVaultHeader(path)
        if args.has("remember") { try keychain.storeMasterKey(master, for: header.vaultID) }
        if let phraseOut {
            try phraseOut.write(Array((phrase + "\n").utf8), at: 0)
            try phraseOut.sync()
            print("Created vault \(path).")
            print(
                "The recovery phrase was written to \(args.value("recovery-phrase-out")!). Move it somewhere safe, off this machine."
            )
        } else {
            print("Created vault \(path).")
            print("")
            print("Recovery phrase (shown once; write it down and keep it safe — anyone with it can open the vault,")
            print("and without it a forgotten credential or a lost keychain means the files are gone):")
            print("")
            print("    \(phrase)")
            print("")
        }
    }
}
