/// A file the program would read or write inside a vault or keychain directory is a symbolic link
/// or not a regular file. It is refused, never followed: whoever can change the directory (a sync
/// service, a shared disk) must not be able to point Vaultaire's writes at another file.
public struct UnsafeFileError: Error, CustomStringConvertible, Equatable {
    /// The path of the offending file or directory.
    public let path: String
    /// What was found there ("a symbolic link", "a FIFO", …).
    public let found: String

    public init(path: String, found: String) {
        self.path = path
        self.found = found
    }

    public var description: String {
        "\(path) is \(found), not a regular file or directory of the vault; refusing to follow or use it"
    }

    /// Words for the file type in `mode`.
    static func kind(_ mode: UInt32) -> String {
        switch mode & 0o170000 {
        case 0o120000: return "a symbolic link"
        case 0o040000: return "a directory"
        case 0o010000: return "a FIFO"
        case 0o140000: return "a socket"
        case 0o020000: return "a character device"
        case 0o060000: return "a block device"
        default: return "not a regular file"
        }
    }
}
