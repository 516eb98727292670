import Glibc

/// Writes to standard error with write(2): no C stdio stream (a global that Swift 6 rightly will not
/// share between threads unchecked), and whole lines that threads do not interleave.
public enum StandardError {
    public static func write(_ text: String) {
        var bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            done += n
        }
    }
}
