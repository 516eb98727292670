import FuzzDriver
import VaultFormat

/// Snapshot plaintext: parsing must never trap or allocate without bound.
let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    _ = try? IndexCodec.decodeSnapshot(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

@_cdecl("FuzzIndex_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
