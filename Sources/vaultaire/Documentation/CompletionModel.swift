/// What each word of a command line completes to, from the commands' specs: one model for the bash,
/// zsh and fish scripts, so they offer the same and never drift from `help`.
enum CompletionModel {
    /// What a positional argument or an option's value is.
    enum Kind: Equatable {
        case directory
        case file
        /// A command for --extpass.
        case command
        /// A mountpoint of a mounted vault (from /proc/self/mounts).
        case mountedVault
        case words([String])
        /// A path inside the vault, a number, a duration: nothing to offer.
        case none
    }

    /// Every command `complete` offers first (the hidden ones are left out).
    static var commandSpecs: [CommandSpec] { commands.map(\.spec) }

    /// What the value of `option` is.
    static func value(of option: CommandSpec.Option) -> Kind {
        switch option.valueName {
        case "file"?: return .file
        case "command"?: return .command
        case "backend"?: return .words(["secret-service", "file"])
        case "KiB"?: return .words(["4", "8", "16", "32", "64", "128", "256", "512", "1024"])
        case "option"?: return .words(mountOptionWords)
        case "size"?: return .words(["normal", "large"])
        default: return .none
        }
    }

    /// Words for `-o`: the mount command's own options and the libfuse ones people use.
    static let mountOptionWords = [
        "passphrase-file=", "extpass=", "keychain=", "idle=", "ro", "read-only", "no-xattrs",
        "no-thumbnails", "no-io-uring", "remember", "allow_other", "allow_root", "auto_unmount", "nosuid", "nodev",
        "noexec", "noatime",
    ]

    /// What the `index`-th positional argument (from 0) of `spec`'s command is.
    static func positional(_ spec: CommandSpec, _ index: Int) -> Kind {
        guard index < spec.arguments.count else { return .none }
        switch (spec.name, spec.arguments[index].0) {
        case (_, "<vault>"): return .directory
        case ("unmount", "<mountpoint>"): return .mountedVault
        case (_, "<mountpoint>"): return .directory
        case ("put", "<source>"), ("get", "<destination>"), ("thumbnail", "<output>"): return .file
        default: return .none
        }
    }

    /// `--long` (and `-s`) for each option, with the help option.
    static func flags(_ option: CommandSpec.Option) -> [String] {
        ["--" + option.long] + (option.short.map { ["-" + String($0)] } ?? [])
    }

    static func options(_ spec: CommandSpec) -> [CommandSpec.Option] { spec.allOptions + [CommandSpec.helpOption] }
}
