import Glibc
import VaultSystem

/// Every command, by name, with its spec and entry point.
nonisolated let commands: [(spec: CommandSpec, run: @Sendable (ParsedArguments) throws -> Void)] = [
    (InitCommand.spec, InitCommand.run),
    (MountCommand.spec, MountCommand.run),
    (UnmountCommand.spec, UnmountCommand.run),
    (StatusCommand.spec, StatusCommand.run),
    (PasswdCommand.spec, PasswdCommand.run),
    (RecoverCommand.spec, RecoverCommand.run),
    (ForgetCommand.spec, ForgetCommand.run),
    (DeviceCommand.spec, DeviceCommand.run),
    (UpgradeCommand.spec, UpgradeCommand.run),
    (InfoCommand.spec, InfoCommand.run),
    (VerifyCommand.spec, VerifyCommand.run),
    (ListCommand.spec, ListCommand.run),
    (PutCommand.spec, PutCommand.run),
    (GetCommand.spec, GetCommand.run),
    (ThumbnailCommand.spec, ThumbnailCommand.run),
    (ThumbnailsCommand.spec, ThumbnailsCommand.run),
    (RemoveCommand.spec, RemoveCommand.run),
    (MakeDirectoryCommand.spec, MakeDirectoryCommand.run),
    (BackupCommand.spec, BackupCommand.run),
    (RestoreCommand.spec, RestoreCommand.run),
    (KDFBenchCommand.spec, KDFBenchCommand.run),
    (Version.spec, Version.run),
]

let overview = """
    OVERVIEW: Vaultaire — an encrypted vault you mount as an ordinary folder.

    USAGE: vaultaire <command> [options]
           vaultaire <vault> <mountpoint> -o <options>   (the form mount.fuse3 runs; see 'vaultaire help mount')

    COMMANDS:
    \(commands.map { "  \($0.spec.name.padding(12))\($0.spec.overview)" }.joined(separator: "\n"))

    See 'vaultaire help <command>' or 'vaultaire <command> --help' for details.

    """

/// Vault names are UTF-8. An argument that is not (a local file named in another encoding) would reach
/// the program with its bad bytes replaced, so that two different names could become one: refuse it.
func firstArgumentNotUTF8() -> String? {
    for i in 1..<Int(CommandLine.argc) {
        guard let raw = CommandLine.unsafeArgv[i], String(validatingCString: raw) == nil else { continue }
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw))
        let shown = bytes.map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16) }
            .joined()
        return "argument \(i) ('\(shown)') is not valid UTF-8; names inside a vault are UTF-8: rename the local file, "
            + "or give the vault path as UTF-8"
    }
    return nil
}

func main() -> Int32 {
    _ = FileSystem.disableCoreDumps()
    if let problem = firstArgumentNotUTF8() {
        printError("Error: \(problem)")
        return ExitCode.usage.rawValue
    }
    var argv = Array(CommandLine.arguments.dropFirst())
    guard let name = argv.first else {
        printError(overview)
        return ExitCode.usage.rawValue
    }
    argv.removeFirst()
    if name == "-h" || name == "--help" {
        print(overview, terminator: "")
        return 0
    }
    if name == "--version" || name == "-V" {
        print(Version.text, terminator: "")
        return 0
    }
    if name == GenerateCommand.name { return GenerateCommand.run(argv) }
    if name == "help" {
        if let topic = argv.first {
            guard let c = commands.first(where: { $0.spec.name == topic }) else {
                printError("Error: unknown command '\(topic)'\nSee 'vaultaire --help'.")
                return ExitCode.usage.rawValue
            }
            print(c.spec.help, terminator: "")
        } else {
            print(overview, terminator: "")
        }
        return 0
    }
    guard let command = commands.first(where: { $0.spec.name == name }) else {
        if MountHelper.matches(name) {
            return run(MountCommand.spec, MountCommand.run, MountHelper.mountArguments(vault: name, rest: argv))
        }
        printError("Error: unknown command '\(name)'\nSee 'vaultaire --help'.")
        return ExitCode.usage.rawValue
    }
    defer { WeakKDFWarning.printIfNoted() }
    return run(command.spec, command.run, argv)
}

/// Parses `argv` for `spec` and runs the command; errors become one line and an exit code.
func run(_ spec: CommandSpec, _ body: (ParsedArguments) throws -> Void, _ argv: [String]) -> Int32 {
    do {
        let args = try spec.parse(argv)
        try body(args)
        return 0
    } catch CLIError.helpRequested(let spec) {
        print(spec.help, terminator: "")
        return 0
    } catch {
        let (line, code) = report(error)
        printError(line)
        return code.rawValue
    }
}

exit(main())
