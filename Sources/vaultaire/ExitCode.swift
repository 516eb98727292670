import Glibc
import VaultBackup
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

/// Fixed exit codes, one per kind of failure, so scripts can tell them apart (see README).
enum ExitCode: Int32 {
    case success = 0
    case failure = 1
    case notAVault = 6
    /// The credential could not be read: its file is missing or unreadable, or `--extpass` failed.
    case credentialUnavailable = 9
    case wrongCredential = 12
    case damaged = 13
    case unsupportedVersion = 14
    case keychainUnavailable = 15
    case deviceMismatch = 16
    case notFound = 17
    case alreadyExists = 18
    case busy = 19
    case rollback = 20
    case mountFailed = 21
    /// A vault or keychain file is a symbolic link or not a regular file.
    case unsafeFile = 22
    /// rclone could not reach, list, read or write the backup remote.
    case remoteUnreachable = 23
    /// An object, manifest or backup header on the backup remote failed its check or is missing.
    case remoteDamaged = 24
    /// A sync client left conflict copies in the vault (written on two machines at once): writing is
    /// refused, and `verify` exits with it when it finds copies and no damage.
    case syncConflict = 25
    /// The last device slot of a vault cannot be removed.
    case lastDeviceSlot = 26
    case usage = 64
    /// A local file (not one inside the vault) or the vault directory itself does not exist.
    case localFileMissing = 66
    case ioError = 74
    case permissionDenied = 77
}

/// Errors the command reports itself.
enum CLIError: Error {
    case usage(String, command: String?)
    case helpRequested(CommandSpec)
    case message(String, ExitCode)
}

/// One clear line (never a secret, never a stack trace) and the exit code for any error.
func report(_ error: Error) -> (String, ExitCode) {
    switch error {
    case CLIError.usage(let message, let command):
        var text = "Error: \(message)"
        if let command { text += "\nSee 'vaultaire \(command) --help'." } else { text += "\nSee 'vaultaire --help'." }
        return (text, .usage)
    case CLIError.message(let message, let code):
        return ("Error: \(message)", code)
    case let e as FormatError:
        switch e {
        case .notAVault: return ("Error: \(e)", .notAVault)
        case .vaultMissing: return ("Error: \(e)", .localFileMissing)
        case .unsupportedVersion: return ("Error: \(e)", .unsupportedVersion)
        case .malformed, .damaged: return ("Error: \(e)", .damaged)
        case .wrongCredential: return ("Error: wrong credential", .wrongCredential)
        case .deviceMismatch: return ("Error: \(e)", .deviceMismatch)
        case .rollback: return ("Error: \(e)", .rollback)
        case .weakKDF: return ("Error: \(e)", .usage)
        case .locked: return ("Error: \(e)", .failure)
        }
    case let e as KeychainError:
        switch e {
        case .unavailable, .deviceLocked, .backendFailure, .insecureStorage:
            return ("Error: \(e)", .keychainUnavailable)
        case .notFound, .invalidKeySize, .corruptItem:
            return ("Error: \(e)", .keychainUnavailable)
        }
    case let e as BackupError:
        switch e {
        case .remoteUnreachable: return ("Error: \(e)", .remoteUnreachable)
        case .remoteDamaged: return ("Error: \(e)", .remoteDamaged)
        case .noBackup: return ("Error: \(e)", .notFound)
        case .otherVault: return ("Error: \(e)", .alreadyExists)
        case .rollback: return ("Error: \(e)", .rollback)
        case .unsupportedVersion: return ("Error: \(e)", .unsupportedVersion)
        case .restoredWithDamage: return ("Error: \(e)", .damaged)
        case .rcloneMissing: return ("Error: \(e)", .failure)
        }
    case let e as CredentialError: return ("Error: \(e)", .usage)
    case let e as RecoveryPhraseError: return ("Error: \(e)", .wrongCredential)
    case let e as WordlistError: return ("Error: \(e)", .failure)
    case let e as UnsafeFileError:
        return ("Error: \(e)", .unsafeFile)
    case let e as DeviceSlotError:
        switch e {
        case .noSuchDevice: return ("Error: \(e)", .notFound)
        case .ambiguous: return ("Error: \(e)", .usage)
        case .lastSlot: return ("Error: \(e)", .lastDeviceSlot)
        }
    case let e as SyncConflictError:
        return ("Error: \(e)", .syncConflict)
    case let e as DamagedFile:
        return ("Error: vault damaged: \(e)", .damaged)
    case let e as FSError:
        return ("Error: \(e)", exitCode(forErrno: e.errno))
    case let e as SystemError:
        // The host failed (a full disk, an I/O error): not damage.
        return ("Error: \(e)", hostExitCode(e.errno))
    case let e as CryptoError:
        return ("Error: \(e)", .failure)
    default:
        return ("Error: \(error)", .failure)
    }
}

func exitCode(forErrno e: Int32) -> ExitCode {
    switch e {
    case ENOENT: return .notFound
    case EEXIST, ENOTEMPTY: return .alreadyExists
    case EACCES, EPERM, EROFS: return .permissionDenied
    case EBUSY: return .busy
    // Damage is typed (FormatError.damaged, DamagedFile); an EIO errno is the host's, or a locked vault.
    default: return .ioError
    }
}
