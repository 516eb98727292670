import VaultCrypto

extension UnlockedVault {
    /// Every key this vault holds now, masked, for a memory scan after lock: the master key, the
    /// three derived keys and the content key of every open file.
    public func maskedKeysForScan() -> [MemoryScan.Masked] {
        meta.withLock { s in
            var out = [
                MemoryScan.Masked(label: "master key", keys.master), .init(label: "index key", keys.index),
                .init(label: "file-header key", keys.fileHeader), .init(label: "thumbnail key", keys.thumbnail),
            ]
            if let watch = conflictWatch { out.append(.init(label: "clean-directory record key", watch.recordKey)) }
            for (id, f) in s.openFiles { out.append(f.blob.maskedContentKey(label: "content key of open file \(id)")) }
            return out
        }
    }
}
