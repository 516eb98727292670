import VaultFormat

/// Snapshot plaintext: parsing must never trap or allocate without bound.
let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    _ = try? IndexCodec.decodeSnapshot(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

// SwiftPM links an executable's entry point as `<target>_main`; hand control to libFuzzer's driver from it.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

@_cdecl("FuzzIndex_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, vector = argv
    return LLVMFuzzerRunDriver(&count, &vector, fuzzOne)
}
