import VaultSystem

/// The mount helper form, `vaultaire VAULT MOUNTPOINT -o OPTIONS`: what mount.fuse3 runs for
/// `mount -t fuse.vaultaire VAULT MOUNTPOINT -o …` and for an /etc/fstab line of type fuse.vaultaire
/// (it runs the program the type's subtype names, with source, mountpoint and `-o`). The options of
/// `vaultaire mount` are accepted in `-o` form as well (`passphrase-file=…`, `extpass=…`, `idle=…`,
/// `keychain=…`, `no-xattrs`, `read-only` or `ro`); every other option goes to libfuse.
enum MountHelper {
    /// Whether `first` (the word after the program name, which names no command) starts the helper
    /// form: an existing directory, the vault.
    static func matches(_ first: String) -> Bool { FileSystem.isDirectory(first) }

    /// The helper form's words as `vaultaire mount`'s arguments.
    static func mountArguments(vault: String, rest: [String]) -> [String] { [vault] + rest }

    /// Options mount(8) and mount.fuse3 pass on that mean nothing to a FUSE mount of a vault. Among
    /// them `suid` and `dev`, which mount.fuse3 adds to every mount not marked nosuid or nodev: a vault
    /// is always mounted nosuid,nodev (docs/SECURITY.md), however it is mounted.
    static let ignored: Set<String> = [
        "", "rw", "defaults", "auto", "noauto", "user", "users", "nouser", "owner",
        "group", "nofail", "_netdev", "suid", "dev",
    ]
    /// Set by vaultaire itself: `vaultaire status` and `unmount` find vaults by them.
    static let reserved: Set<String> = ["fsname", "subtype"]

    /// Sorts every `-o` option (comma-separated; `\,` is a comma inside a value) into `args`, as if it
    /// had been given as `--name` or `--name=value`, or into the returned libfuse options.
    /// - Throws: `CLIError.usage` for a vaultaire option without its value (or with one it takes not),
    ///   and for the options vaultaire sets itself.
    static func absorbOptions(_ args: inout ParsedArguments, spec: CommandSpec) throws -> [String] {
        var libfuse: [String] = []
        let own = Dictionary(spec.allOptions.filter { $0.long != "option" && !$0.repeatable }.map { ($0.long, $0) }) {
            a, _ in a
        }
        for option in (args.repeated["option"] ?? []).flatMap(splitOptions) {
            let key = option.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            let value = option.contains("=") ? String(option.drop { $0 != "=" }.dropFirst()) : nil
            if ignored.contains(option) || option.hasPrefix("x-") || option.hasPrefix("comment=") { continue }
            if reserved.contains(key) {
                throw CLIError.usage(
                    "-o \(key) is set by vaultaire (the vault's path, and type fuse.vaultaire)", command: spec.name)
            }
            let name = option == "ro" ? "read-only" : key
            guard let known = own[name] else {
                libfuse.append(option)
                continue
            }
            if known.valueName != nil {
                guard let value, !value.isEmpty else {
                    throw CLIError.usage("-o \(name) needs a value: \(name)=<\(known.valueName!)>", command: spec.name)
                }
                args.values[name] = value
            } else {
                guard value == nil else { throw CLIError.usage("-o \(name) takes no value", command: spec.name) }
                args.flags.insert(name)
            }
        }
        args.repeated["option"] = nil
        return libfuse
    }

    /// "a,b=c\,d" → ["a", "b=c,d"].
    static func splitOptions(_ text: String) -> [String] {
        var out: [String] = []
        var current = ""
        var escaped = false
        for c in text {
            if escaped {
                current.append(c)
                escaped = false
                continue
            }
            if c == "\\" {
                escaped = true
                continue
            }
            if c == "," {
                out.append(current)
                current = ""
                continue
            }
            current.append(c)
        }
        if escaped { current.append("\\") }
        out.append(current)
        return out
    }
}
