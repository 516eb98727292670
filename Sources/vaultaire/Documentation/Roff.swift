/// Text for roff(7) man pages: what must be escaped so that groff and mandoc print it as written.
enum Roff {
    /// `text` as roff input: backslashes escaped, a control character at a line start neutralized,
    /// and every character outside ASCII as a `\[uXXXX]` escape (groff reads ASCII without preconv).
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case _ where scalar.value > 0x7E:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : String(line)
        }.joined(separator: "\n")
    }

    /// `\fBtext\fR`.
    static func bold(_ text: String) -> String { "\\fB" + escape(text) + "\\fR" }
    /// `\fItext\fR`.
    static func italic(_ text: String) -> String { "\\fI" + escape(text) + "\\fR" }
}
