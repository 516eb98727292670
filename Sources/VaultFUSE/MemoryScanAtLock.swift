import Glibc
import VaultCrypto
import VaultFS
import VaultSystem

/// A test hook: with VAULTAIRE_TEST_MEMORY_SCAN set to a file path, the mount daemon scans its own
/// memory for the vault's keys (held masked) right before and right after it locks at unmount, and
/// writes one line per key to that file: `<label>: before N, after M`. The mount tests use it to
/// show that a real daemon keeps no key after lock, including content keys of files the kernel
/// still holds open. The file holds counts only, never a key; without the variable nothing happens.
enum MemoryScanAtLock {
    static let variable = "VAULTAIRE_TEST_MEMORY_SCAN"

    /// Runs `lock` (which wipes), scanning before and after when the variable is set.
    static func around(_ vault: UnlockedVault, log: (String) -> Void, _ lock: () -> Void) {
        guard let report = FileSystem.environment(variable), !vault.isClosed else { return lock() }
        // A key wiped already (the mount command wipes the master key once the vault holds its
        // derived keys) is zeros: not worth a search, which would match every zero page.
        let secrets = vault.maskedKeysForScan().filter { !$0.isWiped }
        let before = (try? MemoryScan.occurrences(of: secrets)) ?? []
        lock()
        let after = (try? MemoryScan.occurrences(of: secrets)) ?? []
        guard before.count == secrets.count, after.count == secrets.count else { return log("memory scan failed") }
        let lines = secrets.indices.map { "\(secrets[$0].label): before \(before[$0]), after \(after[$0])\n" }.joined()
        if after.contains(where: { $0 > 0 }) { log("memory scan: a key is still in memory after lock") }
        do {
            let fd = try FileDescriptor(path: report, flags: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
            try fd.write(Array(lines.utf8), at: 0)
        } catch {
            log("memory scan: cannot write the report: \(error)")
        }
    }
}
