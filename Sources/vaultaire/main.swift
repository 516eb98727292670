import Glibc
import VaultSystem

/// Every command, by name, with its spec and entry point.
let commands: [(spec: CommandSpec, run: (ParsedArguments) throws -> Void)] = [
    (InitCommand.spec, InitCommand.run),
    (MountCommand.spec, MountCommand.run),
    (UnmountCommand.spec, UnmountCommand.run),
    (StatusCommand.spec, StatusCommand.run),
    (PasswdCommand.spec, PasswdCommand.run),
    (RecoverCommand.spec, RecoverCommand.run),
    (ForgetCommand.spec, ForgetCommand.run),
    (InfoCommand.spec, InfoCommand.run),
    (VerifyCommand.spec, VerifyCommand.run),
    (ListCommand.spec, ListCommand.run),
    (PutCommand.spec, PutCommand.run),
    (GetCommand.spec, GetCommand.run),
    (RemoveCommand.spec, RemoveCommand.run),
    (MakeDirectoryCommand.spec, MakeDirectoryCommand.run),
    (BackupCommand.spec, BackupCommand.run),
    (RestoreCommand.spec, RestoreCommand.run),
    (KDFBenchCommand.spec, KDFBenchCommand.run),
]

let overview = """
    OVERVIEW: Vaultaire — an encrypted vault you mount as an ordinary folder.

    USAGE: vaultaire <command> [options]

    COMMANDS:
    \(commands.map { "  \($0.spec.name.padding(12))\($0.spec.overview)" }.joined(separator: "\n"))

    See 'vaultaire help <command>' or 'vaultaire <command> --help' for details.

    """

func main() -> Int32 {
    _ = FileSystem.disableCoreDumps()
    var argv = Array(CommandLine.arguments.dropFirst())
    guard let name = argv.first else {
        printError(overview)
        return ExitCode.usage.rawValue
    }
    argv.removeFirst()
    if name == "-h" || name == "--help" { print(overview, terminator: ""); return 0 }
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
        printError("Error: unknown command '\(name)'\nSee 'vaultaire --help'.")
        return ExitCode.usage.rawValue
    }
    do {
        let args = try command.spec.parse(argv)
        try command.run(args)
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
