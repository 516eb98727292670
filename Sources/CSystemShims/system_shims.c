#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include "system_shims.h"

int vaultaire_syncfs(int fd) { return syncfs(fd); }

int vaultaire_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int vaultaire_disable_core_dumps(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

void vaultaire_background_thread(const char *name) {
    cpu_set_t process_cpus;
    // The main thread's mask is the process's: nothing pins it.
    if (sched_getaffinity(getpid(), sizeof process_cpus, &process_cpus) == 0)
        (void)pthread_setaffinity_np(pthread_self(), sizeof process_cpus, &process_cpus);
    (void)pthread_setname_np(pthread_self(), name);
}

int vaultaire_open_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how = {
        .flags = (unsigned long long)flags,
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}
