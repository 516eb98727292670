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
        /// The name of this device's slot (`vaultaire device list`).
        public var deviceName = FileSystem.hostName
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
            credential: credential, pattern: pattern, deviceSalt: salt, deviceName: options.deviceName,
            iterations: options.iterations, recoveryPhrase: phraseBytes,
            recoveryIterations: options.recoveryIterations, chunkSizeLog2: options.chunkSizeLog2,
            now: nowNanoseconds() / 1_000_000_000)
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

    /// Derives the vault key from the credential and this device's salt, and unwraps the master key
    /// from this device's slot. When the slot does not open, tells a wrong credential from a damaged
    /// header: the header's checksum, and a remembered master key (whose MAC check needs no
    /// credential), say which it is. The header's MAC is checked when the vault is opened.
    /// When the checksum fails and no slot names this device's salt ID, the damage may be in that salt
    /// ID: every slot is tried with this device's salt, and one that opens shows the credential was
    /// right (the open then finds the header damaged: reading works, `verify --repair` rewrites it).
    public static func unwrapMasterKey(
        at path: String, credential: Credential, keychain: Keychain
    ) throws -> SecureBytes {
        let header = try readHeader(at: path)
        let salt: SecureBytes
        do { salt = try keychain.deviceSalt(create: false) } catch KeychainError.notFound {
            throw FormatError.deviceMismatch
        }
        guard let slot = header.slotIndex(saltID: try VaultHeader.saltID(of: salt)) else {
            if header.checksumMatches {
                if failsRememberedMAC(header, keychain: keychain) {
                    throw FormatError.damaged(HeaderDamage.slotMessage)
                }
                throw FormatError.deviceMismatch
            }
            if let master = unlockAnySlot(header, credential: credential, deviceSalt: salt) { return master }
            throw FormatError.damaged(HeaderDamage.slotMessage)
        }
        do {
            return try header.unlock(slot: slot, credential: credential, deviceSalt: salt)
        } catch FormatError.wrongCredential {
            if !header.checksumMatches || failsRememberedMAC(header, keychain: keychain) {
                throw FormatError.damaged(HeaderDamage.slotMessage)
            }
            throw FormatError.wrongCredential
        }
    }

    /// Whether a master key remembered for this vault is at hand and the header's MAC fails with it:
    /// a change made with the checksum recomputed, which the credential alone cannot tell from a
    /// wrong credential (or from a device without a slot).
    public static func failsRememberedMAC(_ header: VaultHeader, keychain: Keychain) -> Bool {
        guard let remembered = try? keychain.getMasterKey(for: header.vaultID) else { return false }
        defer { remembered.wipe() }
        return !header.isAuthentic(master: remembered)
    }

    /// The master key from the first slot that opens with `credential` and `deviceSalt` whatever salt
    /// ID it names, trying the slots whose KDF cost is acceptable (each costs one PBKDF2).
    private static func unlockAnySlot(
        _ header: VaultHeader, credential: Credential, deviceSalt: SecureBytes
    ) -> SecureBytes? {
        for index in header.slots.indices {
            if let master = try? header.unlock(slot: index, credential: credential, deviceSalt: deviceSalt) {
                return master
            }
        }
        return nil
    }

    /// Opens the vault with its master key (from the credential, the keychain or recovery).
    /// With `acceptRollback`, an index older than this device has seen is accepted (and recorded as
    /// the newest seen) instead of refused: the owner restored an older copy on purpose. With
    /// `settlingNewerBlobs` (`verify --repair`), blobs newer than the index that it does not account
    /// for do not refuse a writable open: they are listed in `syncConflicts`, for `settleNewerBlobs`.
    public static func open(
        at path: String, master: SecureBytes, keychain: Keychain?, readOnly: Bool,
        acceptRollback: Bool = false, settlingNewerBlobs: Bool = false
    ) throws -> UnlockedVault {
        let layout = VaultLayout(root: path)
        let header = try layout.readHeader()
        return try UnlockedVault(
            layout: layout, header: header, master: master, readOnly: readOnly, generations: keychain,
            acceptRollback: acceptRollback, settlingNewerBlobs: settlingNewerBlobs)
    }

    /// Opens read-only a vault directory whose header is `header`, which is not (yet) written there:
    /// a restore checks the vault it laid out before its header makes the directory a vault.
    public static func open(at path: String, header: VaultHeader, master: SecureBytes) throws -> UnlockedVault {
        try UnlockedVault(
            layout: VaultLayout(root: path), header: header, master: master, readOnly: true, generations: nil)
    }

    /// Sets this device's credential: its slot is resealed (or added, on a device that has none yet:
    /// the recovery phrase's way onto a new machine); other devices' slots, the recovery envelope, every
    /// index record and blob stay as they are. Holds the vault lock meanwhile, so the header never
    /// changes under a process that has the vault open for writing (a mount that rewrote it would not
    /// know), and throws EBUSY naming that process. A damaged header is refused: resealing it would
    /// hide the damage (`repairHeader` is the way) unless `repairingHeader`: recovery, where the
    /// recovery phrase has just shown the owner's hand, rewrites it. A version-1 header becomes version 2.
    /// - Returns: whether this device already had a slot.
    @discardableResult
    public static func setCredential(
        at path: String, master: SecureBytes, credential: Credential, pattern: Pattern?,
        keychain: Keychain, iterations: Int? = nil, deviceName: String? = nil, repairingHeader: Bool = false
    ) throws -> Bool {
        try withHeaderForChange(at: path, master: master, allowDamaged: repairingHeader) { header in
            let salt = try keychain.deviceSalt(create: true)
            let existing = header.slotIndex(saltID: try VaultHeader.saltID(of: salt))
            let cost = iterations ?? Int(existing.map { header.slots[$0].iterations } ?? header.largestSlotIterations)
            try header.setSlot(
                master: master, credential: credential, pattern: pattern, deviceSalt: salt,
                name: deviceName ?? existing.map { header.slots[$0].name } ?? FileSystem.hostName,
                iterations: cost, now: nowNanoseconds() / 1_000_000_000)
            return existing != nil
        }
    }

    /// Removes the slot named `nameOrID` (its device name, or its salt ID in hex); never the last one.
    /// - Returns: the removed slot.
    public static func removeDevice(
        at path: String, master: SecureBytes, nameOrID: String
    ) throws -> VaultHeader.DeviceSlot {
        try withHeaderForChange(at: path, master: master) { header in
            let matches = header.slots.indices.filter {
                header.slots[$0].name == nameOrID || header.slots[$0].saltID.hex == nameOrID.lowercased()
            }
            guard let index = matches.first else { throw DeviceSlotError.noSuchDevice(nameOrID) }
            guard matches.count == 1 else { throw DeviceSlotError.ambiguous(nameOrID, matches.count) }
            guard header.slots.count > 1 else { throw DeviceSlotError.lastSlot(header.slots[index].name) }
            let removed = header.slots[index]
            try header.removeSlot(at: index, master: master)
            return removed
        }
    }

    /// Rewrites a damaged header's checksum and MAC, keeping every slot and the recovery envelope as
    /// they are: what the owner of `master` does once `verify` has said the header is damaged and the
    /// recovery phrase has opened the recovery envelope (the caller's check: the new MAC vouches for it).
    /// Slots that no longer open stay unusable (remove them with `removeDevice`).
    public static func repairHeader(at path: String, master: SecureBytes) throws {
        let layout = VaultLayout(root: path)
        try refuseSyncConflicts(layout)
        let lock = try VaultLock.acquire(try layout.lockFile())
        defer { withExtendedLifetime(lock) {} }
        var header = try layout.readHeader()
        guard !header.isAuthentic(master: master) else { return }
        try header.reseal(master: master)
        try layout.writeHeader(header)
    }

    /// Seals the master key under a new recovery phrase, replacing the recovery envelope, and rewrites
    /// the checksum and MAC: the repair of a header whose recovery envelope may be the damaged part
    /// (or whose old phrase is lost). The slots are kept. The recovery KDF keeps its cost unless that
    /// field is implausible (below the floor, or past ten times the default, as a flipped bit makes it).
    public static func replaceRecoveryEnvelope(
        at path: String, master: SecureBytes, phrase: String, wordlist: Wordlist
    ) throws {
        let bytes = try RecoveryPhrase.validate(phrase, words: wordlist)
        defer { bytes.wipe() }
        try withHeaderForChange(at: path, master: master, allowDamaged: true) { header in
            let kept = Int(header.recovery.iterations)
            let plausible =
                (try? KDFPolicy.check(kept, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")) != nil
                && kept <= 10 * KDFPolicy.recoveryIterations
            try header.replaceRecoveryEnvelope(
                master: master, recoveryPhrase: bytes, iterations: plausible ? kept : KDFPolicy.recoveryIterations)
        }
    }

    /// Reads the header under the vault lock, lets `change` alter it, and writes it back atomically.
    /// Refuses a header that `master` does not authenticate, unless `allowDamaged`.
    private static func withHeaderForChange<R>(
        at path: String, master: SecureBytes, allowDamaged: Bool = false, _ change: (inout VaultHeader) throws -> R
    ) throws -> R {
        let layout = VaultLayout(root: path)
        try refuseSyncConflicts(layout)
        let lock = try VaultLock.acquire(try layout.lockFile())
        defer { withExtendedLifetime(lock) {} }
        var header = try layout.readHeader()
        guard allowDamaged || header.isAuthentic(master: master) else {
            throw FormatError.damaged(HeaderDamage.message)
        }
        let result = try change(&header)
        try layout.writeHeader(header)
        return result
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

/// What a damaged `vault.header` means for its owner, in one sentence.
public enum HeaderDamage {
    public static let message =
        "vault.header fails its checksum or MAC (damaged or altered): files can still be read; "
        + "writing is refused until 'vaultaire verify --repair --recovery-phrase-file FILE' rewrites it"
    /// When the damage keeps this device's slot from opening.
    public static let slotMessage =
        "vault.header fails its checksum or MAC (damaged or altered) and this device's slot does not open: "
        + "'vaultaire recover' (the recovery phrase) rewrites it"
}

/// Failures of `vaultaire device`.
public enum DeviceSlotError: Error, Equatable, CustomStringConvertible {
    /// No slot has that device name or salt ID.
    case noSuchDevice(String)
    /// More than one slot has that name: use the salt ID.
    case ambiguous(String, Int)
    /// A vault keeps at least one slot.
    case lastSlot(String)

    public var description: String {
        switch self {
        case .noSuchDevice(let name):
            return "the vault has no device slot named '\(name)' (see 'vaultaire device list')"
        case .ambiguous(let name, let count):
            return "\(count) device slots are named '\(name)': name the one to remove by its salt ID"
        case .lastSlot(let name):
            return "'\(name)' is the vault's only device slot; it cannot be removed"
        }
    }
}

extension VaultHeader {
    /// The highest KDF cost of any slot: a new device's slot costs no less than the others.
    public var largestSlotIterations: UInt32 { slots.map(\.iterations).max() ?? UInt32(KDFPolicy.vaultIterations) }
}
