import VaultFormat

/// Recovery phrases and patterns as typed by a person: any text gives a value or a typed error.
let wordlist = try! Wordlist.load()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? RecoveryPhrase.validate(text, words: wordlist)
    if let p = try? Pattern(text: text) { precondition((try? Pattern(text: p.text)) == p, "pattern text does not round-trip") }
    return 0
}
