import Dispatch
import VaultFS

/// Large reads decrypted in two halves at once.
///
/// Through FUSE over io_uring the kernel queues a request on the ring of the CPU its caller runs on,
/// whose workers are pinned there, so the read-ahead of a program reading a file straight through
/// would be decrypted on the reader's CPU while the other idles. Through /dev/fuse the loop's threads
/// already take read-ahead requests side by side, and splitting still measured a little faster.
/// Only requests big enough to outweigh waking a helper (docs/PERFORMANCE.md, "Read-ahead window").
enum SplitRead {
    static let minimumSize = 256 * 1024
    /// Halves start on a multiple of this, so each stays on whole chunks (whose reads share the file's lock).
    static let alignment = 64 * 1024

    static func wanted(size: Int) -> Bool { size >= minimumSize }

    /// Reads `buffer.count` bytes at `offset` as two reads side by side; the bytes read, as one read would.
    static func read(
        _ vault: UnlockedVault, _ handle: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        let half = buffer.count / 2 / alignment * alignment
        let job = Halves(vault, handle, offset: offset, buffer: buffer, half: half)
        DispatchQueue.concurrentPerform(iterations: 2) { job.read($0) }
        if let e = job.failures[0] ?? job.failures[1] { throw e }
        return job.counts[0] < half ? job.counts[0] : half + job.counts[1]
    }

    /// The two halves of one read. Each of the two iterations touches only its own half of the buffer
    /// and its own slot of `counts` and `failures`, which are read only after both have ended.
    private final class Halves: @unchecked Sendable {
        let vault: UnlockedVault, handle: FileHandle, offset: Int, half: Int
        let parts: [UnsafeMutableRawBufferPointer]
        var counts = [0, 0]
        var failures: [Error?] = [nil, nil]

        init(
            _ vault: UnlockedVault, _ handle: FileHandle, offset: Int, buffer: UnsafeMutableRawBufferPointer, half: Int
        ) {
            self.vault = vault
            self.handle = handle
            self.offset = offset
            self.half = half
            parts = [
                UnsafeMutableRawBufferPointer(rebasing: buffer[..<half]),
                UnsafeMutableRawBufferPointer(rebasing: buffer[half...]),
            ]
        }

        func read(_ i: Int) {
            do { counts[i] = try vault.read(handle, at: offset + (i == 0 ? 0 : half), into: parts[i]) } catch {
                failures[i] = error
            }
        }
    }
}
