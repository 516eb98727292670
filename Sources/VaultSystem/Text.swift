/// The few string operations the program needs, without Foundation.
extension String {
    /// Every occurrence of `target` replaced by `replacement`.
    public func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let r = rest.range(of: target) {
            out += rest[..<r.lowerBound] + replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }

    /// Right-aligned in `width` columns (longer strings as they are).
    public func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }

    /// One line per message: a newline inside (from an error's text) would split a log line.
    public var replacingNewlines: String { String(map { $0 == "\n" ? " " : $0 }) }
}

extension StringProtocol {
    /// Without leading and trailing white space.
    public var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}

extension Substring {
    /// The first range where `target` occurs.
    public func range(of target: String) -> Range<Index>? {
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(target) { return i..<index(i, offsetBy: target.count) }
            i = index(after: i)
        }
        return nil
    }
}
