import FuzzDriver
import VaultCrypto
import VaultFormat
import VaultSystem

/// A thumbnail file of arbitrary bytes never opens (no key here authenticates random data), and the
/// same bytes taken as an authenticated version 2 payload decode to a set or a typed error, never a
/// trap: the payload's lengths are bounded and checked.
let key = SecureBytes(copying: [UInt8](repeating: 7, count: 32))
let id = [UInt8](repeating: 1, count: 16)

let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if (try? Thumbnail.open(bytes, key: key, vaultID: id, inodeID: 2, blobID: id)) != nil {
        preconditionFailure("random bytes authenticated as a thumbnail file")
    }
    if let set = try? Thumbnail.decodePayload(bytes) {
        precondition(set.normal.count + set.large.count + 24 == bytes.count, "decoded lengths disagree")
    }
    return 0
}

@_cdecl("FuzzThumbnail_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
