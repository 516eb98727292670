/// `vaultaire __generate man|bash|zsh|fish`: the man page and the completion scripts, for packagers
/// (scripts/package-deb.sh). Hidden from the command list; made from the same specs as `help`.
enum GenerateCommand {
    static let name = "__generate"

    static func output(_ what: String) -> String? {
        switch what {
        case "man": return ManPage.text
        case "bash": return BashCompletion.text
        case "zsh": return ZshCompletion.text
        case "fish": return FishCompletion.text
        default: return nil
        }
    }

    static func run(_ argv: [String]) -> Int32 {
        guard argv.count == 1, let text = output(argv[0]) else {
            printError("Error: usage: vaultaire \(name) man|bash|zsh|fish")
            return ExitCode.usage.rawValue
        }
        print(text, terminator: "")
        return 0
    }
}
