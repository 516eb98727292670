import VaultSystem

/// The iteration floors of the seed, and the one testing override.
public enum KDFPolicy {
    public static let vaultIterations = 600_000
    public static let recoveryIterations = 800_000
    /// Below this no count is accepted, override or not.
    public static let absoluteMinimum = 1_000
    /// Above this a count is refused too: an altered header must not turn an unlock into hours of work.
    public static let maximum = 50_000_000

    /// `VAULTAIRE_ALLOW_WEAK_KDF=1` lets tests use small counts to stay fast.
    public static var weakAllowed: Bool { FileSystem.environment("VAULTAIRE_ALLOW_WEAK_KDF") == "1" }

    public static func check(_ iterations: Int, minimum: Int, what: String) throws {
        let floor = weakAllowed ? absoluteMinimum : minimum
        guard iterations >= floor, iterations <= maximum else {
            throw FormatError.weakKDF(what: what, iterations: iterations, minimum: floor)
        }
    }
}
