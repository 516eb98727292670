import VaultFormat

/// What `vaultaire --version` prints: the program's version and the vault format versions it reads
/// and writes. scripts/package-deb.sh takes the package version from its first line.
enum Version {
    /// The program's version (semantic versioning; the Debian package carries it).
    static let program = "0.9.0"
    /// The date of this version, for the man page's title line.
    static let date = "2026-12-04"

    /// Vault format versions this build opens; a vault of any other version is refused with exit 14.
    static let formatsRead = VaultHeader.versionsRead
    /// The vault format version of every vault this build creates or writes.
    static let formatWritten = VaultHeader.formatVersion

    static var text: String {
        """
        vaultaire \(program)
        vault format: reads versions \(formatsRead.map(String.init).joined(separator: ", ")), writes version \(formatWritten)

        """
    }

    static let spec = CommandSpec(
        name: "version", overview: "Print the program's version and the vault format versions it reads and writes.",
        usage: "vaultaire version (or vaultaire --version)",
        arguments: [], options: [], minimumPositionals: 0, maximumPositionals: 0)

    static func run(_ args: ParsedArguments) throws { print(text, terminator: "") }
}
