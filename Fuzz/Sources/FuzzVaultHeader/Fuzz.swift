import FuzzDriver
import Glibc
import VaultCrypto
import VaultFormat

/// vault.header: decoding must never trap; a decoded header re-encodes to the same bytes, the pattern
/// grid it names can be handed to the pattern parser, and opening its envelopes with a fixed
/// credential only ever fails with a typed error. Seeds (past crashes) are in Fuzz/corpus/FuzzVaultHeader.
let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let header = try? VaultHeader(decoding: bytes) else { return 0 }
    precondition(header.encoded() == bytes, "header does not round-trip")
    if header.credential.kind == .pattern {
        _ = try? Pattern(
            text: "a1-b2-c3-d4", rows: Int(header.credential.patternRows),
            columns: Int(header.credential.patternColumns))
    }
    setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
    if header.credential.iterations <= 5_000 {
        let salt = SecureBytes(count: 32)
        _ = try? header.unlock(credential: .passphrase(SecureBytes(copying: Array("fuzz".utf8))), deviceSalt: salt)
    }
    return 0
}

@_cdecl("FuzzVaultHeader_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
