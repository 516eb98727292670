import FuzzDriver
import VaultFormat

/// Recovery phrases and patterns as typed by a person: any text gives a value or a typed error.
let wordlist = try! Wordlist.load()

let fuzzOne: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32 = { data, size in
    guard let data else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? RecoveryPhrase.validate(text, words: wordlist)
    if let p = try? Pattern(text: text) {
        precondition((try? Pattern(text: p.text)) == p, "pattern text does not round-trip")
    }
    return 0
}

@_cdecl("FuzzRecoveryPhrase_main")
public func entry(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    runFuzzer(argc, argv, fuzzOne)
}
