import Glibc
import VaultCrypto
import VaultSystem

/// `--passphrase-file FILE`: a regular file, a pipe, a FIFO, /dev/stdin, a `<(…)` process
/// substitution, or `-` for standard input.
enum SecretFile {
    /// The credential in `path`, read to its end; one trailing newline is stripped.
    /// - Throws: `CLIError` with the local-file exit codes (66 missing, 77 denied, 74 otherwise) when
    ///   the file cannot be opened or read, and `credentialUnavailable` when it is empty or too long.
    static func read(_ path: String, option: String) throws -> SecureBytes {
        let source = path == "-" ? "standard input (--\(option) -)" : "the local secret file \(path) (--\(option))"
        var owned: FileDescriptor?
        if path != "-" {
            // Opening a FIFO waits for its writer, as reading one should.
            do { owned = try FileDescriptor(path: path, flags: O_RDONLY) } catch let e as SystemError {
                throw CLIError.message("cannot open \(source): \(PathErrors.reason(e.errno))", localExitCode(e.errno))
            }
        }
        do { return try SecretStream.readToEnd(owned?.rawValue ?? 0) } catch {
            if case let .system(e) = error { throw CLIError.message(error.message(source), localExitCode(e.errno)) }
            throw CLIError.message(error.message(source), .credentialUnavailable)
        }
    }
}
