import Glibc
import VaultFS
import VaultFormat
import VaultSystem

/// Errors about one path, in one line that names it and says whether it is a local file or a path
/// inside the vault — the two are easy to confuse in `put`, `get` and friends.
enum PathErrors {
    /// Runs `body`, reporting its failure as about `path` inside the vault.
    static func inVault<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as FSError {
            throw CLIError.message("\(path) in the vault: \(reason(e.errno))", exitCode(forErrno: e.errno))
        } catch let e as DamagedFile {
            throw CLIError.message("\(path) in the vault is damaged: \(e.reason)", .damaged)
        } catch let e as SystemError {
            // The host failed under the vault (a full disk, an I/O error): not damage.
            throw CLIError.message("\(path) in the vault could not be written or read: \(e)", hostExitCode(e.errno))
        }
    }

    /// Runs `body`, reporting its failure as about the local file `path`.
    static func local<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as SystemError {
            throw CLIError.message("local file \(path): \(reason(e.errno))", localExitCode(e.errno))
        } catch let e as FSError {
            throw CLIError.message("local file \(path): \(reason(e.errno))", localExitCode(e.errno))
        }
    }

    static func reason(_ errno: Int32) -> String { String(cString: strerror(errno)) }
}

/// The exit code for a failure on a local file (not one inside the vault).
func localExitCode(_ errno: Int32) -> ExitCode {
    switch errno {
    case ENOENT, ENOTDIR: return .localFileMissing
    case EEXIST: return .alreadyExists
    case EACCES, EPERM, EROFS: return .permissionDenied
    default: return .ioError
    }
}

/// The exit code for a failure of the host filesystem that holds the vault.
func hostExitCode(_ errno: Int32) -> ExitCode {
    switch errno {
    case EACCES, EPERM, EROFS: return .permissionDenied
    default: return .ioError
    }
}
