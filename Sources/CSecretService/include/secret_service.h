#ifndef VAULTAIRE_SECRET_SERVICE_H
#define VAULTAIRE_SECRET_SERVICE_H
#include <stddef.h>

/// Outcomes of the Secret Service calls, mapped to KeychainError in Swift.
enum vaultaire_secret_status {
    VAULTAIRE_SECRET_OK = 0,
    VAULTAIRE_SECRET_NOT_FOUND = 1,
    VAULTAIRE_SECRET_LOCKED = 2,
    VAULTAIRE_SECRET_UNAVAILABLE = 3,
    VAULTAIRE_SECRET_FAILED = 4,
    VAULTAIRE_SECRET_TOO_LARGE = 5,
};

/// Stores `len` bytes under `account` in the default collection (replacing an existing item).
/// `message` receives a malloc'ed description on failure (never containing the secret); free it.
int vaultaire_secret_store(const char *account, const char *kind, const char *vault, const char *label,
                           const unsigned char *data, size_t len, int may_prompt, char **message);
/// Copies the item's bytes into `out` (capacity `cap`), setting `*len`.
int vaultaire_secret_lookup(const char *account, unsigned char *out, size_t cap, size_t *len,
                            int may_prompt, char **message);
/// Deletes the item; an absent item is OK.
int vaultaire_secret_clear(const char *account, int may_prompt, char **message);

#endif
