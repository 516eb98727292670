internal import COpenSSL

/// Turns an OpenSSL return code into a thrown error carrying `ERR_get_error()`.
@inline(__always)
func check(_ result: Int32, _ operation: String) throws {
    guard result == 1 else {
        let code = ERR_get_error()
        ERR_clear_error()
        throw CryptoError.openSSLFailure(operation: operation, code: UInt(code))
    }
}
