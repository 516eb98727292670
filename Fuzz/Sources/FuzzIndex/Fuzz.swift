import VaultFormat

/// Snapshot plaintext: parsing must never trap or allocate without bound.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = try? IndexCodec.decodeSnapshot(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
