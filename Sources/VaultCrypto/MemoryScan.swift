import Glibc

/// Looks for secrets in this process's readable memory (every mapping in /proc/self/maps, read
/// through /proc/self/mem), to prove that locking wiped them. The secrets are held only XOR-masked,
/// so the scan itself never puts them back in memory. Used by `WipeTests` and, when
/// VAULTAIRE_TEST_MEMORY_SCAN names a report file, by the mount daemon at unmount.
public enum MemoryScan {
    static let mask: UInt8 = 0x5A

    /// A secret to look for, masked.
    public struct Masked {
        public let label: String
        let bytes: [UInt8]

        public init(label: String, _ secret: SecureBytes) {
            self.label = label
            self.bytes = secret.withUnsafeBytes { $0.map { $0 ^ MemoryScan.mask } }
        }

        /// Whether the secret was all zeros (wiped already) when it was masked: nothing to look for.
        public var isWiped: Bool { bytes.allSatisfy { $0 == MemoryScan.mask } }

        /// For secrets that only exist spread out (recovery entropy in a phrase): already masked.
        public init(label: String, maskedBytes: [UInt8]) {
            self.label = label
            self.bytes = maskedBytes
        }
    }

    /// Masks `bytes` as `Masked` expects (for building a masked secret bit by bit).
    public static func masked(zeros count: Int) -> [UInt8] { [UInt8](repeating: mask, count: count) }

    /// How often each secret occurs in this process's readable memory.
    public static func occurrences(of secrets: [Masked]) throws -> [Int] {
        let maps = try readProcFile("/proc/self/maps")
        let mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC)
        guard mem >= 0 else { throw CryptoError.scanUnavailable(errno: errno) }
        defer { close(mem) }
        var found = [Int](repeating: 0, count: secrets.count)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        let overlap = max(0, (secrets.map(\.bytes.count).max() ?? 1) - 1)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            if line.contains("[vvar]") || line.contains("[vsyscall]") { continue }
            let range = fields[0].split(separator: "-").compactMap { UInt(String($0), radix: 16) }
            guard range.count == 2 else { continue }
            var address = range[0]
            // The last bytes of the previous read go first in the buffer, so that a secret lying
            // across two reads is found; fewer than the longest secret, so none is counted twice.
            var carried = 0
            while address < range[1] {
                let length = Int(min(UInt(buffer.count - carried), range[1] - address))
                let n = buffer.withUnsafeMutableBytes { b in
                    pread(mem, b.baseAddress! + carried, length, off_t(Int64(bitPattern: UInt64(address))))
                }
                if n <= 0 { break }
                let filled = carried + n
                buffer.withUnsafeBytes { b in
                    for (i, secret) in secrets.enumerated() {
                        found[i] += count(secret.bytes, in: UnsafeRawBufferPointer(rebasing: b[0..<filled]))
                    }
                }
                carried = min(overlap, filled)
                buffer.withUnsafeMutableBytes { b in
                    b.baseAddress!.copyMemory(from: b.baseAddress! + filled - carried, byteCount: carried)
                }
                address += UInt(n)
            }
        }
        return found
    }

    /// A /proc file, read to its end (its size reads as 0).
    private static func readProcFile(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CryptoError.scanUnavailable(errno: errno) }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            out += chunk[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func count(_ masked: [UInt8], in b: UnsafeRawBufferPointer) -> Int {
        guard let first = masked.first, b.count >= masked.count else { return 0 }
        var found = 0
        var p = b.baseAddress!
        let end = b.baseAddress! + b.count
        while p < end, let hit = memchr(p, Int32(first ^ mask), end - p) {
            let h = hit.assumingMemoryBound(to: UInt8.self)
            if end - UnsafeRawPointer(h) >= masked.count {
                var match = true
                for k in 1..<masked.count where h[k] ^ mask != masked[k] {
                    match = false
                    break
                }
                if match { found += 1 }
            }
            p = UnsafeRawPointer(h) + 1
        }
        return found
    }
}
