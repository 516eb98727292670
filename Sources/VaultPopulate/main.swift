import Glibc
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

// Fills a vault with many small files through the engine itself, for scripts/bench.sh's scale part:
// a million files through a mount would take most of an hour. The vault must have been made with
// `--remember` and the file keychain (VAULTAIRE_KEYCHAIN=file), where its master key is read from.
//
//     vaultaire-populate VAULT FILES DIRECTORIES [MAX_BYTES]
//
// Files are spread evenly over DIRECTORIES new directories under the root (d00000/f0000000 …), each of
// a size drawn uniformly from 0…MAX_BYTES (default 16,384) and filled with pseudo-random bytes.

func zeroPadded(_ n: Int, _ width: Int) -> String {
    let digits = String(n)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

let arguments = CommandLine.arguments
guard arguments.count >= 4, let files = Int(arguments[2]), let directories = Int(arguments[3]), directories > 0
else {
    StandardError.write("usage: vaultaire-populate VAULT FILES DIRECTORIES [MAX_BYTES]\n")
    exit(2)
}
let maximumSize = arguments.count > 4 ? Int(arguments[4]) ?? 16384 : 16384

do {
    let path = arguments[1]
    let keychain = Keychain(backend: FileKeychain(directory: try FileKeychain.defaultDirectory()))
    let header = try VaultAccess.readHeader(at: path)
    let master = try keychain.getMasterKey(for: header.vaultID)
    let vault = try VaultAccess.open(at: path, master: master, keychain: keychain, readOnly: false)
    master.wipe()
    // xorshift64*: reproducible, not secret. Sizes have a stream of their own, so that
    // scripts/bench-scale.sh can make the same sizes elsewhere with one draw per file.
    func xorshift(_ state: inout UInt64) -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }
    var sizeState: UInt64 = 0x9E37_79B9_7F4A_7C15
    var fillState: UInt64 = 0x2545_F491_4F6C_DD1D
    func next() -> UInt64 { xorshift(&fillState) }
    var buffer = [UInt8](repeating: 0, count: maximumSize)
    var parents: [UInt64] = []
    for d in 0..<directories {
        let name = "d" + zeroPadded(d, 5)
        parents.append(
            try vault.makeNode(in: Inode.rootID, name: name, kind: .directory, permissions: 0o755, caller: .current).id)
    }
    for f in 0..<files {
        let size = Int(xorshift(&sizeState) % UInt64(maximumSize + 1))
        buffer.withUnsafeMutableBytes { b in
            var i = 0
            while i < size {
                var word = next()
                let n = min(8, size - i)
                memcpy(b.baseAddress! + i, &word, n)
                i += n
            }
        }
        let name = "f" + zeroPadded(f, 7)
        let handle = try vault.create(in: parents[f % directories], name: name, permissions: 0o644, caller: .current)
        if size > 0 {
            _ = try buffer.withUnsafeBytes {
                try vault.write(handle, at: 0, from: UnsafeRawBufferPointer(rebasing: $0[0..<size]))
            }
        }
        vault.release(handle)
        if (f + 1) % 50_000 == 0 {
            try vault.commit(durable: true)
            StandardError.write("\(f + 1) files\n")
        }
    }
    try vault.close()
} catch {
    StandardError.write("vaultaire-populate: \(error)\n")
    exit(1)
}
