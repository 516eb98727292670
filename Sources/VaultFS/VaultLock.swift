import Glibc
import VaultSystem

/// `mount.lock` in the vault directory: held (flock) by the one process that has the vault open for
/// writing, and naming it by PID. The kernel drops a flock when its holder dies, so a lock left by a
/// killed process never blocks for ever; the leftover file then only earns a notice.
///
/// A leftover PID is also the evidence of a crash that a writable open of the vault needs (blobs
/// written after the index by a killed writer are its own, not another machine's): only a holder
/// that repairs after a crash — a writable `UnlockedVault` — clears it. Any other holder (a header
/// change, a check that the vault is free) puts the leftover bytes back as it lets go.
///
/// The file is opened through the vault's directory descriptor with no symbolic link followed and
/// must be a regular file. Its contents are never printed: only a PID parsed strictly from them.
final class VaultLock {
    private let fd: FileDescriptor
    let file: AnchoredPath
    private(set) var staleNotice: String?
    /// What a gone holder left in the file, to put back at release (unless cleared).
    private var leftover: [UInt8]?
    /// Whether the gone holder ran on this machine since it booted (its line names this boot): only
    /// then is what it left certainly this machine's crash, not a lock a sync client brought from
    /// another machine that has the vault open.
    private(set) var leftByThisBoot = false

    private init(fd: FileDescriptor, file: AnchoredPath) {
        self.fd = fd
        self.file = file
    }

    /// Takes the lock, or throws EBUSY naming the process that holds it. With `clearingLeftover`, a
    /// gone holder's PID is cleared for good (the caller repairs after the crash it shows).
    static func acquire(_ file: AnchoredPath, clearingLeftover: Bool = false) throws -> VaultLock {
        var attempts = 0
        while true {
            let fd = try file.open(flags: O_RDWR | O_CREAT, mode: 0o600)
            if flock(fd.rawValue, LOCK_EX | LOCK_NB) != 0 {
                let holder = readPID(fd).map { "process \($0)" } ?? "another process"
                throw FSError(EBUSY, "the vault is already open by \(holder) (mounted, or a command running on it)")
            }
            // The holder before us removes the file as it lets go: if it did so between our open and our
            // flock, we hold a lock on a file no one else will find, while the next process makes a
            // new one and locks that. Only a lock on the file still at the path counts.
            if try isCurrent(fd, at: file) { return try finishAcquiring(fd, file, clearingLeftover: clearingLeftover) }
            attempts += 1
            guard attempts < 100 else { throw FSError(EBUSY, "mount.lock keeps changing under this process") }
        }
    }

    /// Whether `fd` is the file now at `file` (not one removed and replaced since it was opened).
    static func isCurrent(_ fd: FileDescriptor, at file: AnchoredPath) throws -> Bool {
        let held = try fd.identity()
        guard held.links > 0 else { return false }
        guard let now = try? file.open(flags: O_RDONLY).identity() else { return false }
        return now.device == held.device && now.inode == held.inode
    }

    private static func finishAcquiring(
        _ fd: FileDescriptor, _ file: AnchoredPath, clearingLeftover: Bool
    ) throws -> VaultLock {
        let lock = VaultLock(fd: fd, file: file)
        if (try? fd.size()) ?? 0 > 0 {
            lock.staleNotice =
                readPID(fd).map { "a lock left by process \($0), which is gone, was cleared" }
                ?? "a leftover lock file was cleared"
            if !clearingLeftover { lock.leftover = readLeftover(fd) }
            lock.leftByThisBoot = readHolder(fd).map { $0.boot != nil && $0.boot == currentBoot } ?? false
        }
        try lock.recordHolder()
        return lock
    }

    /// Writes this process's PID into the file: at acquisition, and again in the mount daemon after
    /// it has detached (the PID written before the fork is the parent's, which exits).
    func recordHolder() throws {
        try fd.truncate(to: 0)
        try fd.write(Array("\(getpid())\(VaultLock.currentBoot.map { " " + $0 } ?? "")\n".utf8), at: 0)
    }

    /// This boot's ID (the kernel's random boot_id: 36 characters of hex digits and dashes), if readable.
    static let currentBoot: String? = {
        guard let bytes = try? FileSystem.readFile("/proc/sys/kernel/random/boot_id", limit: 64) else { return nil }
        let id = bytes.last == UInt8(ascii: "\n") ? Array(bytes.dropLast()) : bytes
        return isBootID(id) ? String(decoding: id, as: UTF8.self) : nil
    }()

    static func isBootID(_ bytes: [UInt8]) -> Bool {
        bytes.count == 36
            && bytes.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
                    || $0 == UInt8(ascii: "-")
            }
    }

    /// A lock file's line: 1 to 10 decimal digits (the PID), optionally a space and a boot ID, and an
    /// optional newline; nothing else.
    static func parseHolder(_ bytes: [UInt8]) -> (pid: Int32, boot: String?)? {
        var line = bytes[...]
        if line.last == UInt8(ascii: "\n") { line = line.dropLast() }
        var boot: String?
        if let space = line.firstIndex(of: UInt8(ascii: " ")) {
            let tail = Array(line[(space + 1)...])
            guard isBootID(tail) else { return nil }
            boot = String(decoding: tail, as: UTF8.self)
            line = line[..<space]
        }
        guard (1...10).contains(line.count),
            line.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let value = Int32(String(decoding: line, as: UTF8.self)), value > 0
        else { return nil }
        return (value, boot)
    }

    private static func readPID(_ fd: FileDescriptor) -> Int32? { readHolder(fd)?.pid }

    private static func readHolder(_ fd: FileDescriptor) -> (pid: Int32, boot: String?)? {
        var buffer = [UInt8](repeating: 0, count: 64)
        guard let n = try? buffer.withUnsafeMutableBytes({ try fd.read(into: $0, at: 0) }), n < buffer.count else {
            return nil
        }
        return parseHolder(Array(buffer[0..<n]))
    }

    /// The first bytes of a leftover lock file (a PID, or whatever a crash left: 64 bytes are plenty
    /// to keep it non-empty, which is all its readers look at beyond a strictly parsed PID).
    private static func readLeftover(_ fd: FileDescriptor) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = (try? buffer.withUnsafeMutableBytes { try fd.read(into: $0, at: 0) }) ?? 0
        return n > 0 ? Array(buffer[0..<n]) : Array("leftover\n".utf8)
    }

    deinit {
        try? fd.truncate(to: 0)
        if let leftover {
            _ = try? fd.write(leftover, at: 0)
        } else {
            try? file.remove()
        }
        flock(fd.rawValue, LOCK_UN)
    }
}
