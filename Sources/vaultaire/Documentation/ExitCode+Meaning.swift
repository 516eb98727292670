extension ExitCode {
    /// What the code means, for the man page's EXIT STATUS (README's table says the same).
    var meaning: String {
        switch self {
        case .success: return "success"
        case .failure: return "other failure"
        case .notAVault: return "not a vault"
        case .credentialUnavailable:
            return
                "the credential could not be read (passphrase file unreadable, --extpass command failed, empty or too long)"
        case .wrongCredential: return "wrong credential or recovery phrase"
        case .damaged: return "vault damaged (verify found damage, or data failed authentication)"
        case .unsupportedVersion: return "unsupported format version"
        case .keychainUnavailable: return "keychain unavailable or locked"
        case .deviceMismatch:
            return "this device has no slot in the vault (another machine, or a reset keychain): use vaultaire recover"
        case .notFound: return "no such file inside the vault; no backup (or no such snapshot) on the remote"
        case .alreadyExists: return "already exists / not empty (also: the remote holds another vault's backups)"
        case .busy: return "busy (the vault is open in another process)"
        case .rollback:
            return "index rolled back to an older version; a backup snapshot older than this machine has seen"
        case .mountFailed: return "mount failed"
        case .unsafeFile:
            return
                "a file in the vault or keychain directory is a symbolic link or not a regular file (refused, not followed)"
        case .remoteUnreachable: return "backup remote unreachable (rclone could not list, read or write it)"
        case .remoteDamaged:
            return "backup remote damaged (an object, manifest or backup header failed its check, or is missing)"
        case .syncConflict:
            return
                "the vault was written on two machines at once: a sync client left conflict copies in it (writing refused; verify lists them)"
        case .lastDeviceSlot: return "the vault's last device slot cannot be removed"
        case .usage: return "usage error (also: an argument that is not valid UTF-8)"
        case .localFileMissing: return "a local file (or the vault directory) does not exist"
        case .ioError: return "I/O error"
        case .permissionDenied: return "permission denied"
        }
    }

    /// Every code, in order.
    static let all: [ExitCode] = [
        .success, .failure, .notAVault, .credentialUnavailable, .wrongCredential, .damaged,
        .unsupportedVersion, .keychainUnavailable, .deviceMismatch, .notFound, .alreadyExists,
        .busy, .rollback, .mountFailed, .unsafeFile, .remoteUnreachable, .remoteDamaged, .syncConflict, .lastDeviceSlot,
        .usage,
        .localFileMissing,
        .ioError,
        .permissionDenied,
    ]
}
