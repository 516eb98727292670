import Glibc

/// How many AES-GCM seals one key may make before it is replaced. Every seal draws a random 96-bit
/// nonce, so the chance of two seals under one key sharing a nonce stays below 2⁻³² while a key has
/// made fewer than 2³² seals (NIST SP 800-38D, 8.3); keys are replaced at a quarter of that.
public enum SealBudget {
    public static let defaultLimit: UInt64 = 1 << 30

    /// The limit in force: `defaultLimit`, or lower when `VAULTAIRE_TEST_SEAL_LIMIT` asks for it (tests
    /// use it to see rotation happen; it can only make keys rotate sooner, never later).
    public static let limit: UInt64 = {
        guard let text = getenv("VAULTAIRE_TEST_SEAL_LIMIT").map({ String(cString: $0) }),
            let value = UInt64(text), value >= 2
        else { return defaultLimit }
        return min(value, defaultLimit)
    }()
}
