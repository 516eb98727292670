import FuzzDriver
import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// A file blob of arbitrary bytes: opening its header and reading its chunks yields typed errors only,
/// and never plaintext (no key here can authenticate random data).
let key = SecureBytes(copying: [UInt8](repeating: 7, count: 32))
let path = "/tmp/vaultaire-fuzz-blob-\(getpid())"
let file = try! DirectoryDescriptor(path: "/tmp").file("vaultaire-fuzz-blob-\(getpid())")
let blobID = [UInt8](repeating: 1, count: 16)

let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    _ = write(fd, data, size)
    close(fd)
    guard
        let (blob, _) = try? FileBlob.open(
            file: file, blobID: blobID, inodeID: 2, vaultID: blobID, headerKey: key,
            chunkSizeLog2: 12, writable: false, version: 1, allowPreviousVersion: true)
    else { return 0 }
    preconditionFailure("random bytes authenticated as a file header: \(blob.path)")
}

@_cdecl("FuzzFileBlob_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
