internal import CFuse

// The C types libfuse's low-level callbacks take (fuse_lowlevel.h), named once so that each handler's
// signature reads as what it receives.

/// The request being served: reply to it exactly once (`fuse_reply_*`).
typealias FUSERequest = fuse_req_t?

/// An open file's or directory's `fuse_file_info`: its open flags, and `fh`, where open stored its handle.
typealias FUSEFileInfo = UnsafeMutablePointer<fuse_file_info>?

/// A NUL-terminated name or value from the kernel (file names, link targets, attribute names).
typealias CString = UnsafePointer<CChar>?
