import VaultFS
import VaultFormat
import VaultSystem

/// The loud line every command prints when the vault it opens has KDF iteration counts below the
/// floors (600,000 / 800,000): such a vault can only have been made with VAULTAIRE_ALLOW_WEAK_KDF,
/// which exists for tests, and a copy of it is cheap to attack. Printed once, as the command's last
/// line on stderr (so an error stays the first), or before a mount detaches.
enum WeakKDFWarning {
    static let prefix = "Warning: weak key derivation:"
    /// The line to print, once noted, and whether it was printed.
    private static let state = Guarded<(pending: String?, printed: Bool)>((nil, false))

    /// What is below the floors in `header`, or nil when nothing is.
    static func shortfall(_ header: VaultHeader) -> String? {
        var parts: [String] = []
        let vaultCounts = header.slots.map(\.iterations) + [header.legacyBackup?.iterations].compactMap { $0 }
        if let weakest = vaultCounts.min(), Int(weakest) < KDFPolicy.vaultIterations {
            parts.append("vault KDF \(weakest) iterations (floor \(KDFPolicy.vaultIterations))")
        }
        if Int(header.recovery.iterations) < KDFPolicy.recoveryIterations {
            parts.append(
                "recovery KDF \(header.recovery.iterations) iterations (floor \(KDFPolicy.recoveryIterations))")
        }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// Notes `header` for the warning.
    static func note(_ header: VaultHeader) {
        guard let what = shortfall(header) else { return }
        let line =
            "\(prefix) this vault's \(what) — made with VAULTAIRE_ALLOW_WEAK_KDF, which is for tests only; "
            + "a stolen copy is cheap to guess against. Move its files to a vault made without it."
        state.withLock { if $0.pending == nil { $0.pending = line } }
    }

    static func printIfNoted() {
        let line = state.withLock { s -> String? in
            guard let line = s.pending, !s.printed else { return nil }
            s.printed = true
            return line
        }
        if let line { printError(line) }
    }
}

/// The vault's header, read for a command that works on it (and noted for the weak-KDF warning).
func readVaultHeader(_ path: String) throws -> VaultHeader {
    let header = try VaultAccess.readHeader(at: path)
    WeakKDFWarning.note(header)
    return header
}
