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

    /// fallocate(PUNCH_HOLE): bytes `range` (clipped to the file) read as zeros from now on. The whole
    /// chunks inside it become a gap and the partial ones at its ends are zeroed; the last chunk counts
    /// as whole when the range reaches the end of the file. Returns the chunks that became the gap:
    /// the caller frees their host space once a durable record lists them as a hole.
    func punch(_ range: Range<Int>) throws -> Range<Int> {
        let end = min(range.upperBound, size)
        guard range.lowerBound < end else { return 0..<0 }
        let firstWhole = (range.lowerBound + chunkSize - 1) / chunkSize
        let endWhole = end == size ? chunkCount : end / chunkSize
        let whole = firstWhole..<max(firstWhole, endWhole)
        if !whole.isEmpty && gaps.count >= maximumGaps {
            throw FSError(EOPNOTSUPP, "a file can hold at most \(maximumGaps) holes")
        }
        try zeroWithinChunk(range.lowerBound..<min(end, firstWhole * chunkSize))
        let tail = max(endWhole * chunkSize, range.lowerBound)
        if endWhole >= firstWhole && tail < end { try zeroWithinChunk(tail..<end) }
        guard !whole.isEmpty else { return whole }
        forgetCachedChunk(in: whole)
        closeGaps(whole)
        gaps.append(whole)
        gaps = holeList
        modifiedSinceCommit = true
        return whole
    }

    /// fallocate mode 0 or FALLOC_FL_KEEP_SIZE: host space reserved for the chunks of bytes `range`,
    /// and unless `keepSize` the file grown to cover it (the new part a gap, reading as zeros).
    /// Reserves first, so that a host without the space (ENOSPC) or the call (EOPNOTSUPP) changes nothing.
    func reserve(_ range: Range<Int>, keepSize: Bool) throws {
        try blob.reserveSpace(chunks: range.lowerBound / chunkSize..<(range.upperBound + chunkSize - 1) / chunkSize)
        if !keepSize && range.upperBound > size { try truncate(to: range.upperBound) }
    }

    /// lseek SEEK_DATA (`data`) or SEEK_HOLE from `offset`: where the next data or hole begins (the end
    /// of the file is a hole), nil when `offset` is at or past the end.
    func seek(from offset: Int, data: Bool) -> Int? {
        guard offset >= 0, offset < size else { return nil }
        let holes = holeList  // sorted, and no two touch
        if data {
            var position = offset
            for hole in holes where hole.lowerBound * chunkSize <= position && position < hole.upperBound * chunkSize {
                position = hole.upperBound * chunkSize
            }
            return position < size ? position : nil
        }
        for hole in holes where hole.upperBound * chunkSize > offset {
            return min(max(offset, hole.lowerBound * chunkSize), size)
        }
        return size
    }
}
