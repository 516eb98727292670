import Glibc

/// Chunks sealed ahead of a write, in slots laid out as on disk (ciphertext only, so plain memory).
final class PresealedChunks {
    let first: Int
    let count: Int
    let slotSize: Int
    let all: UnsafeMutableRawBufferPointer

    init(first: Int, count: Int, slotSize: Int) {
        self.first = first
        self.count = count
        self.slotSize = slotSize
        self.all = UnsafeMutableRawBufferPointer.allocate(byteCount: count * slotSize, alignment: 16)
    }

    deinit { all.deallocate() }

    /// The slots of chunks `from ..< from + count`, or nil when they were not all sealed ahead.
    func slots(_ from: Int, count n: Int) -> UnsafeMutableRawBufferPointer? {
        guard from >= first, from + n <= first + count else { return nil }
        return UnsafeMutableRawBufferPointer(rebasing: all[(from - first) * slotSize..<(from - first + n) * slotSize])
    }
}
