#define _GNU_SOURCE
#include <sys/vfs.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/prctl.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "system_shims.h"

int vaultaire_syncfs(int fd) { return syncfs(fd); }

int vaultaire_fallocate(int fd, int mode, long long offset, long long length) {
    return fallocate(fd, mode, offset, length);
}

long long vaultaire_filesystem_type(int fd) {
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0) return -1;
    return (long long)fs.f_type;
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

int vaultaire_idle_priority(void) {
    struct sched_param none = {0};
    // Linux applies both to the calling thread only (pid 0 = this thread).
    int idle = sched_setscheduler(0, SCHED_IDLE, &none);
    int nice = setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    return idle == 0 || nice == 0 ? 0 : -1;
}

int vaultaire_thread_nice(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

int vaultaire_write_back(int fd, long long offset, long long length, int wait) {
    unsigned int flags = SYNC_FILE_RANGE_WRITE;
    if (wait) flags |= SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER;
    return sync_file_range(fd, (off_t)offset, (off_t)length, flags);
}

static socklen_t abstract_address(const char *name, struct sockaddr_un *address) {
    size_t length = strlen(name);
    if (length + 1 > sizeof(address->sun_path)) { errno = ENAMETOOLONG; return 0; }
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path + 1, name, length);  // sun_path[0] = 0: the abstract namespace
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + length);
}

int vaultaire_abstract_listen(const char *name) {
    struct sockaddr_un address;
    socklen_t length = abstract_address(name, &address);
    if (length == 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&address, length) != 0 || listen(fd, 8) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int vaultaire_abstract_connect(const char *name) {
    struct sockaddr_un address;
    socklen_t length = abstract_address(name, &address);
    if (length == 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc;
    do { rc = connect(fd, (struct sockaddr *)&address, length); } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

long long vaultaire_peer_uid(int fd) {
    struct ucred credentials;
    socklen_t size = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return -1;
    return (long long)credentials.uid;
}

int vaultaire_open_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how = {
        .flags = (unsigned long long)flags,
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int vaultaire_open_unnamed(const char *directory, unsigned int mode) {
    return open(directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
}

int vaultaire_name_unnamed(int fd, const char *path) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}
