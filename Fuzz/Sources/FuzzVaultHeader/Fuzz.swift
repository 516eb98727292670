import FuzzDriver
import Glibc
import VaultCrypto
import VaultFormat

/// vault.header (versions 1 and 2): decoding must never trap; a decoded version-2 header whose checksum
/// matches re-encodes to the same bytes, the pattern grids its slots name can be handed to the pattern
/// parser, and opening its envelopes or checking its MAC with a fixed key only ever fails with a typed error. Seeds (past crashes) are in Fuzz/corpus/FuzzVaultHeader.
let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let header = try? VaultHeader(decoding: bytes) else { return 0 }
    if header.version == 2 && header.checksumMatches {
        precondition(header.encoded() == bytes, "header does not round-trip")
    }
    setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
    let salt = SecureBytes(count: 32)
    for (i, slot) in header.slots.enumerated() {
        if slot.kind == .pattern {
            _ = try? Pattern(text: "a1-b2-c3-d4", rows: Int(slot.patternRows), columns: Int(slot.patternColumns))
        }
        if slot.iterations <= 5_000 {
            _ = try? header.unlock(
                slot: i, credential: .passphrase(SecureBytes(copying: Array("fuzz".utf8))), deviceSalt: salt)
        }
    }
    _ = header.isAuthentic(master: salt)
    return 0
}

@_cdecl("FuzzVaultHeader_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
