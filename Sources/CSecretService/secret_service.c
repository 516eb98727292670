// A thin layer over libsecret's non-variadic API (Swift cannot call the variadic one), which also
// tells a locked item or collection apart from a missing one instead of letting libsecret prompt.
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <libsecret/secret.h>
#include "secret_service.h"

static const SecretSchema schema = {
    "org.vaultaire.Secret", SECRET_SCHEMA_NONE,
    {
        { "account", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { "kind", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { "vault", SECRET_SCHEMA_ATTRIBUTE_STRING },
        { NULL, 0 },
    },
    0, 0, 0, 0, 0, 0, 0, 0
};

static int fail(int status, GError *error, const char *what, char **message) {
    if (message) {
        const char *detail = error ? error->message : "";
        size_t n = strlen(what) + strlen(detail) + 3;
        *message = malloc(n);
        if (*message) snprintf(*message, n, "%s%s%s", what, *detail ? ": " : "", detail);
    }
    if (error) g_error_free(error);
    return status;
}

static SecretService *connect(char **message, int *status) {
    GError *error = NULL;
    // A fresh connection each time rather than the shared instance, which stays bound to a service
    // that may have been replaced (a keyring restarted to unlock it).
    SecretService *service = secret_service_open_sync(SECRET_TYPE_SERVICE, NULL, SECRET_SERVICE_OPEN_SESSION, NULL, &error);
    if (!service) *status = fail(VAULTAIRE_SECRET_UNAVAILABLE, error, "cannot reach the Secret Service", message);
    return service;
}

static GHashTable *attributes_for(const char *account, const char *kind, const char *vault) {
    GHashTable *a = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(a, "account", (gpointer)account);
    if (kind) g_hash_table_insert(a, "kind", (gpointer)kind);
    if (vault) g_hash_table_insert(a, "vault", (gpointer)vault);
    return a;
}

/// Unlocks `objects` through the service's prompt, only when the caller allows prompting.
static int try_unlock(SecretService *service, GList *objects, int may_prompt) {
    if (!may_prompt) return 0;
    GList *unlocked = NULL;
    GError *error = NULL;
    int n = secret_service_unlock_sync(service, objects, NULL, &unlocked, &error);
    if (error) g_error_free(error);
    g_list_free_full(unlocked, g_object_unref);
    return n > 0;
}

/// True when `object` (an item or collection) is usable: unlocked already, or unlocked by a prompt.
static int ensure_unlocked(SecretService *service, gpointer object, int locked, int may_prompt) {
    if (!locked) return 1;
    GList *one = g_list_append(NULL, object);
    int unlocked = try_unlock(service, one, may_prompt);
    g_list_free(one);
    return unlocked;
}

static GList *find(SecretService *service, const char *account, GError **error) {
    GHashTable *a = attributes_for(account, NULL, NULL);
    GList *items = secret_service_search_sync(service, &schema, a, SECRET_SEARCH_ALL, NULL, error);
    g_hash_table_unref(a);
    return items;
}

int vaultaire_secret_store(const char *account, const char *kind, const char *vault, const char *label,
                           const unsigned char *data, size_t len, int may_prompt, char **message) {
    int status = VAULTAIRE_SECRET_OK;
    SecretService *service = connect(message, &status);
    if (!service) return status;
    GError *error = NULL;
    SecretCollection *collection = secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT,
                                                                    SECRET_COLLECTION_NONE, NULL, &error);
    if (!collection) {
        g_object_unref(service);
        return fail(VAULTAIRE_SECRET_FAILED, error, "the keyring has no default collection", message);
    }
    if (!ensure_unlocked(service, collection, secret_collection_get_locked(collection), may_prompt)) {
        g_object_unref(collection); g_object_unref(service);
        return fail(VAULTAIRE_SECRET_LOCKED, NULL, "the default keyring is locked", message);
    }
    SecretValue *value = secret_value_new((const gchar *)data, (gssize)len, "application/octet-stream");
    GHashTable *a = attributes_for(account, kind, vault);
    SecretItem *item = secret_item_create_sync(collection, &schema, a, label, value, SECRET_ITEM_CREATE_REPLACE, NULL, &error);
    g_hash_table_unref(a);
    secret_value_unref(value);
    g_object_unref(collection);
    g_object_unref(service);
    if (!item) return fail(VAULTAIRE_SECRET_FAILED, error, "the Secret Service refused to store the item", message);
    g_object_unref(item);
    return VAULTAIRE_SECRET_OK;
}

/// Connects and finds the items stored under `account`; on failure returns the status to give back.
static int connect_and_find(const char *account, SecretService **service, GList **items, char **message) {
    int status = VAULTAIRE_SECRET_OK;
    *service = connect(message, &status);
    if (!*service) return status;
    GError *error = NULL;
    *items = find(*service, account, &error);
    if (error) {
        g_object_unref(*service);
        return fail(VAULTAIRE_SECRET_FAILED, error, "search failed", message);
    }
    return VAULTAIRE_SECRET_OK;
}

int vaultaire_secret_lookup(const char *account, unsigned char *out, size_t cap, size_t *len,
                            int may_prompt, char **message) {
    SecretService *service = NULL;
    GList *items = NULL;
    int status = connect_and_find(account, &service, &items, message);
    if (status != VAULTAIRE_SECRET_OK) return status;
    if (!items) { g_object_unref(service); return VAULTAIRE_SECRET_NOT_FOUND; }
    GError *error = NULL;
    SecretItem *item = items->data;
    if (!ensure_unlocked(service, item, secret_item_get_locked(item), may_prompt)) {
        g_list_free_full(items, g_object_unref); g_object_unref(service);
        return fail(VAULTAIRE_SECRET_LOCKED, NULL, "the keyring holding the item is locked", message);
    }
    if (!secret_item_load_secret_sync(item, NULL, &error)) {
        g_list_free_full(items, g_object_unref); g_object_unref(service);
        return fail(VAULTAIRE_SECRET_FAILED, error, "cannot read the item", message);
    }
    SecretValue *value = secret_item_get_secret(item);
    int result = VAULTAIRE_SECRET_FAILED;
    if (value) {
        gsize n = 0;
        const gchar *bytes = secret_value_get(value, &n);
        if (n <= cap) { memcpy(out, bytes, n); *len = n; result = VAULTAIRE_SECRET_OK; }
        else result = VAULTAIRE_SECRET_TOO_LARGE;
        secret_value_unref(value);  // libsecret keeps secrets in non-pageable memory and wipes them
    }
    g_list_free_full(items, g_object_unref);
    g_object_unref(service);
    return result == VAULTAIRE_SECRET_OK ? result : fail(result, NULL, "the item is empty or too large", message);
}

int vaultaire_secret_clear(const char *account, int may_prompt, char **message) {
    SecretService *service = NULL;
    GList *items = NULL;
    int result = connect_and_find(account, &service, &items, message);
    if (result != VAULTAIRE_SECRET_OK) return result;
    GError *error = NULL;
    for (GList *l = items; l; l = l->next) {
        SecretItem *item = l->data;
        if (!ensure_unlocked(service, item, secret_item_get_locked(item), may_prompt)) {
            result = fail(VAULTAIRE_SECRET_LOCKED, NULL, "the keyring holding the item is locked", message);
            break;
        }
        if (!secret_item_delete_sync(item, NULL, &error)) {
            result = fail(VAULTAIRE_SECRET_FAILED, error, "cannot delete the item", message);
            break;
        }
    }
    g_list_free_full(items, g_object_unref);
    g_object_unref(service);
    return result;
}
