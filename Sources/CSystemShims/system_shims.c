#define _GNU_SOURCE
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include "system_shims.h"

int vaultaire_syncfs(int fd) { return syncfs(fd); }

int vaultaire_disable_core_dumps(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
