#ifndef VAULTAIRE_COPENSSL_SHIM_H
#define VAULTAIRE_COPENSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/hmac.h>

// Function-like and aliased macros Swift cannot import, as prefixed inline shims.
static inline int COpenSSL_gcm_get_tag(EVP_CIPHER_CTX *ctx, int len, void *tag) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, len, tag);
}
static inline int COpenSSL_gcm_set_tag(EVP_CIPHER_CTX *ctx, int len, void *tag) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, len, tag);
}

#endif
