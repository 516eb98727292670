/// `vaultaire __generate man|bash|zsh|fish`: the man page and the completion scripts, for packagers
/// (scripts/package-deb.sh). Hidden from the command list; made from the same specs as `help`.
enum GenerateCommand {
    static let name = "__generate"

    static let outputs: [String: @Sendable () -> String] = [
        "man": { ManPage.text },
        "bash": { BashCompletion.text },
        "zsh": { ZshCompletion.text },
        "fish": { FishCompletion.text },
    ]

    static func run(_ argv: [String]) -> Int32 {
        guard argv.count == 1, let make = outputs[argv[0]] else {
            printError("Error: usage: vaultaire \(name) man|bash|zsh|fish")
            return ExitCode.usage.rawValue
        }
        print(make(), terminator: "")
        return 0
    }
}
