import Glibc

/// Gaps: chunks past an old end that read as zeros and are not on disk yet (see `OpenFile.gaps`).
/// Called with the file's lock held, like every other method of `OpenFile`.
extension OpenFile {
    func inGap(_ index: Int) -> Bool { gaps.contains { $0.contains(index) } }

    func overlapsGap(_ chunks: Range<Int>) -> Bool { gaps.contains { $0.overlaps(chunks) } }

    /// Takes `chunks` out of the gaps (they were written, or the cache or a truncation took them).
    func closeGaps(_ chunks: Range<Int>) {
        guard overlapsGap(chunks) else { return }
        var kept: [Range<Int>] = []
        for gap in gaps {
            guard gap.overlaps(chunks) else {
                kept.append(gap)
                continue
            }
            if gap.lowerBound < chunks.lowerBound { kept.append(gap.lowerBound..<chunks.lowerBound) }
            if chunks.upperBound < gap.upperBound { kept.append(chunks.upperBound..<gap.upperBound) }
        }
        gaps = kept
    }

    /// Seals zeros into every chunk still in a gap, a run at a time.
    func writeGaps() throws {
        guard !gaps.isEmpty else { return }
        let zeros = UnsafeMutableRawBufferPointer.allocate(
            byteCount: min(maximumRun, gaps.map(\.count).max()!) * chunkSize, alignment: 16)
        defer { zeros.deallocate() }
        _ = memset(zeros.baseAddress!, 0, zeros.count)
        for gap in gaps {
            var first = gap.lowerBound
            while first < gap.upperBound {
                let run = min(maximumRun, gap.upperBound - first)
                try writeRun(first, count: run, from: UnsafeRawBufferPointer(rebasing: zeros[0..<run * chunkSize]))
                first += run
            }
        }
    }
}
