import VaultFormat

/// Journal record plaintext: decoding and applying changes must never trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = try? IndexCodec.decodeAndApplyRecord(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
