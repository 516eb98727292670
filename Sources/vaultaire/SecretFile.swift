import Glibc
import VaultCrypto
import VaultSystem

/// `--passphrase-file FILE`: a regular file, a pipe, a FIFO, /dev/stdin, a `<(…)` process
/// substitution, or `-` for standard input.
enum SecretFile {
    /// The credential in `path`, read to its end; one trailing newline is stripped.
    /// - Throws: `CLIError` with exit code `credentialUnavailable` when it cannot be read, is empty
    ///   or is too long.
    static func read(_ path: String, option: String) throws -> SecureBytes {
        let source = path == "-" ? "standard input (--\(option) -)" : "--\(option) \(path)"
        var owned: FileDescriptor?
        if path != "-" {
            // Opening a FIFO waits for its writer, as reading one should.
            do { owned = try FileDescriptor(path: path, flags: O_RDONLY) } catch let e as SystemError {
                // A local file that is not there is the local-file error, as for any other command.
                let code: ExitCode = e.errno == ENOENT ? .localFileMissing : .credentialUnavailable
                throw CLIError.message(
                    "cannot open the local file of \(source): \(String(cString: strerror(e.errno)))", code)
            }
        }
        do { return try SecretStream.readToEnd(owned?.rawValue ?? 0) } catch {
            throw CLIError.message(error.message(source), .credentialUnavailable)
        }
    }
}
