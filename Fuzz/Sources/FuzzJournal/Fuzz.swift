import FuzzDriver
import VaultFormat

/// Journal record plaintext: decoding and applying changes must never trap.
let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    _ = try? IndexCodec.decodeAndApplyRecord(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

@_cdecl("FuzzJournal_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
