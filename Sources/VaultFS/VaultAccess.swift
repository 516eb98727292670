import Glibc
import VaultCrypto
import VaultFormat
import VaultKeychain
import VaultSystem

/// Creating vaults and opening them: with a credential, a remembered master key, or the recovery phrase;
/// and changing the credential (which rewraps the master key and touches nothing else).
public enum VaultAccess {
    public struct CreateOptions {
        public var iterations = KDFPolicy.vaultIterations
        public var recoveryIterations = KDFPolicy.recoveryIterations
        /// 4 KiB chunks: random 4 KiB I/O needs no read-modify-write and small files take one chunk;
        /// sequential I/O batches runs of chunks into one system call (docs/PERFORMANCE.md, "Chunk size").
        public var chunkSizeLog2: UInt8 = 12
        public init() {}
    }

    /// Creates a vault at `path` (absent or an empty directory). Returns the recovery phrase — shown once
    /// and never stored — and the master key, which the caller may remember in the keychain.
    public static func create(
        at path: String, credential: Credential, pattern: Pattern?, keychain: Keychain,
        options: CreateOptions = CreateOptions(), wordlist: Wordlist
    ) throws -> (phrase: String, master: SecureBytes) {
        try KDFPolicy.check(options.iterations, minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        try KDFPolicy.check(options.recoveryIterations, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        if FileSystem.exists(path) {
            guard FileSystem.isDirectory(path) else { throw FSError(ENOTDIR, path) }
            guard try FileSystem.listDirectory(path).isEmpty else { throw FSError(EEXIST, "\(path) is not empty") }
        }
        let salt = try keychain.deviceSalt(create: true)
        let phrase = try RecoveryPhrase.generate(words: wordlist)
        let phraseBytes = try RecoveryPhrase.validate(phrase, words: wordlist)
        let (header, master) = try VaultHeader.create(
            credential: credential, pattern: pattern, deviceSalt: salt, iterations: options.iterations,
            recoveryPhrase: phraseBytes, recoveryIterations: options.recoveryIterations,
            chunkSizeLog2: options.chunkSizeLog2)
        let layout = VaultLayout(root: path)
        let old = umask(0o077)
        defer { umask(old) }
        try layout.createDirectories()
        let keys = try KeySchedule(master: master)
        let store = IndexStore(directory: try layout.indexDirectory(), vaultID: header.vaultID, key: keys.index)
        try store.create(IndexState.empty(uid: getuid(), gid: getgid(), now: nowNanoseconds()))
        // The header goes last: a directory without it is not (yet) a vault.
        try layout.writeHeader(header)
        return (phrase, master)
    }

    public static func readHeader(at path: String) throws -> VaultHeader {
        try VaultLayout(root: path).readHeader()
    }

    /// Derives the vault key from the credential and this device's salt, and unwraps the master key.
    public static func unwrapMasterKey(
        at path: String, credential: Credential, keychain: Keychain
    ) throws -> SecureBytes {
        let header = try readHeader(at: path)
        let salt: SecureBytes
        do { salt = try keychain.deviceSalt(create: false) } catch KeychainError.notFound {
            throw FormatError.deviceMismatch
        }
        return try header.unlock(credential: credential, deviceSalt: salt)
    }

    /// Opens the vault with its master key (from the credential, the keychain or recovery).
    /// With `acceptRollback`, an index older than this device has seen is accepted (and recorded as
    /// the newest seen) instead of refused: the owner restored an older copy on purpose.
    public static func open(
        at path: String, master: SecureBytes, keychain: Keychain?, readOnly: Bool,
        acceptRollback: Bool = false
    ) throws -> UnlockedVault {
        let layout = VaultLayout(root: path)
        let header = try layout.readHeader()
        return try UnlockedVault(
            layout: layout, header: header, master: master, readOnly: readOnly, generations: keychain,
            acceptRollback: acceptRollback)
    }

    /// Sets a new credential: the master key is rewrapped; no index record or blob changes. Holds the
    /// vault lock meanwhile, so the header never changes under a process that has the vault open for
    /// writing (a mount that rewrote it would not know), and throws EBUSY naming that process.
    public static func changeCredential(
        at path: String, master: SecureBytes, newCredential: Credential, pattern: Pattern?,
        keychain: Keychain, iterations: Int? = nil
    ) throws {
        let layout = VaultLayout(root: path)
        try refuseSyncConflicts(layout)
        let lock = try VaultLock.acquire(try layout.lockFile())
        defer { withExtendedLifetime(lock) {} }
        var header = try layout.readHeader()
        let salt = try keychain.deviceSalt(create: true)
        try header.wrapForCredential(
            master, credential: newCredential, pattern: pattern, deviceSalt: salt,
            iterations: iterations ?? Int(header.credential.iterations))
        try layout.writeHeader(header)
    }

    /// Throws when the vault may not be written now, for commands that change the header, to refuse
    /// before asking for anything: `SyncConflictError` when a sync client left conflict copies in it,
    /// EBUSY (naming the process) when another process has it open for writing. `changeCredential`
    /// checks again, holding the lock.
    public static func checkWritable(at path: String) throws {
        let layout = VaultLayout(root: path)
        try refuseSyncConflicts(layout)
        _ = try VaultLock.acquire(try layout.lockFile())
    }

    /// Throws `SyncConflictError` when the vault directory holds a sync client's conflict copies.
    /// Without the index, copies of blobs are named by blob ID only.
    static func refuseSyncConflicts(_ layout: VaultLayout) throws {
        let conflicts = try SyncConflict.scan(layout)
        guard conflicts.isEmpty else {
            throw SyncConflictError(copies: UnlockedVault.describe(conflicts, root: layout.root, files: [:]))
        }
    }

    /// Opens the recovery envelope with the phrase and returns the master key.
    public static func recoverMasterKey(at path: String, phrase: String, wordlist: Wordlist) throws -> SecureBytes {
        let header = try readHeader(at: path)
        let bytes = try RecoveryPhrase.validate(phrase, words: wordlist)
        return try header.unlock(recoveryPhrase: bytes)
    }
}
