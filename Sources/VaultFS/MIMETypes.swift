/// A MIME type guessed from a file name's extension, for the sealed file header.
enum MIMETypes {
    static let byExtension: [String: String] = [
        "txt": "text/plain", "md": "text/markdown", "html": "text/html", "htm": "text/html", "css": "text/css",
        "csv": "text/csv", "json": "application/json", "xml": "application/xml", "js": "text/javascript",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tar": "application/x-tar",
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "svg": "image/svg+xml", "mp4": "video/mp4", "mov": "video/quicktime",
        "mp3": "audio/mpeg", "wav": "audio/wav", "ogg": "audio/ogg", "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "odt": "application/vnd.oasis.opendocument.text", "sqlite": "application/vnd.sqlite3",
        "db": "application/vnd.sqlite3",
    ]

    static func guess(for name: String) -> String {
        let bytes = name.utf8
        guard let dot = bytes.lastIndex(of: UInt8(ascii: ".")), dot != bytes.startIndex else {
            return "application/octet-stream"
        }
        let suffix = bytes[bytes.index(after: dot)...]
        // Extensions in the table are short and ASCII; anything else cannot match.
        guard suffix.count <= 8 else { return "application/octet-stream" }
        let lowered = suffix.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        return byExtension[String(decoding: lowered, as: UTF8.self)] ?? "application/octet-stream"
    }
}
