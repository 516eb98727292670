// Preloaded into a vaultaire command by the crash tests (LD_PRELOAD): counts the calls that change
// what is on disk — writes to files, truncations, syncs, renames, links, unlinks — and kills the
// process with SIGKILL just before call number KILL_AT_CALL (1-based; 0 or unset: never). So a test
// can stop a command after each of its steps in turn, not at a random moment. With
// KILL_AT_COUNT_FILE set, the number of calls made is written there when the process exits normally;
// with KILL_AT_TRACE set, each counted call is named on standard error (to find what a step was).
// Writes to standard input, output and error are not counted: they change nothing on disk.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_long calls;
static long kill_at;
static int trace;

__attribute__((constructor)) static void read_target(void) {
    const char *at = getenv("KILL_AT_CALL");
    kill_at = at ? atol(at) : 0;
    trace = getenv("KILL_AT_TRACE") != NULL;
}

__attribute__((destructor)) static void report_count(void) {
    const char *path = getenv("KILL_AT_COUNT_FILE");
    if (!path) return;
    char text[32];
    int length = snprintf(text, sizeof text, "%ld\n", atomic_load(&calls));
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    (void)syscall(SYS_write, fd, text, (size_t)length);
    (void)syscall(SYS_close, fd);
}

static void step_named(const char *name, int fd) {
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (trace) {
        char line[96];
        int length = snprintf(line, sizeof line, "kill_at_call %ld: %s fd %d\n", n, name, fd);
        (void)syscall(SYS_write, 2, line, (size_t)length);
    }
    if (kill_at > 0 && n == kill_at) raise(SIGKILL);
}

#define step() step_named(__func__, -1)
#define step_fd(fd) step_named(__func__, fd)
#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void *buffer, size_t count) {
    if (fd > 2) step_fd(fd);
    return REAL("write", ssize_t (*)(int, const void *, size_t))(fd, buffer, count);
}
ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    step_fd(fd);
    return REAL("pwrite", ssize_t (*)(int, const void *, size_t, off_t))(fd, buffer, count, offset);
}
ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    step_fd(fd);
    return REAL("pwrite64", ssize_t (*)(int, const void *, size_t, off_t))(fd, buffer, count, offset);
}
ssize_t writev(int fd, const struct iovec *iov, int count) {
    if (fd > 2) step_fd(fd);
    return REAL("writev", ssize_t (*)(int, const struct iovec *, int))(fd, iov, count);
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    step_fd(fd);
    return REAL("pwritev", ssize_t (*)(int, const struct iovec *, int, off_t))(fd, iov, count, offset);
}
int ftruncate(int fd, off_t length) {
    step_fd(fd);
    return REAL("ftruncate", int (*)(int, off_t))(fd, length);
}
int ftruncate64(int fd, off_t length) {
    step_fd(fd);
    return REAL("ftruncate64", int (*)(int, off_t))(fd, length);
}
int fsync(int fd) {
    step_fd(fd);
    return REAL("fsync", int (*)(int))(fd);
}
int fdatasync(int fd) {
    step_fd(fd);
    return REAL("fdatasync", int (*)(int))(fd);
}
int syncfs(int fd) {
    step_fd(fd);
    return REAL("syncfs", int (*)(int))(fd);
}
int rename(const char *from, const char *to) {
    step();
    return REAL("rename", int (*)(const char *, const char *))(from, to);
}
int renameat(int fromDir, const char *from, int toDir, const char *to) {
    step();
    return REAL("renameat", int (*)(int, const char *, int, const char *))(fromDir, from, toDir, to);
}
int renameat2(int fromDir, const char *from, int toDir, const char *to, unsigned flags) {
    step();
    return REAL("renameat2", int (*)(int, const char *, int, const char *, unsigned))(
        fromDir, from, toDir, to, flags);
}
int linkat(int fromDir, const char *from, int toDir, const char *to, int flags) {
    step();
    return REAL("linkat", int (*)(int, const char *, int, const char *, int))(fromDir, from, toDir, to, flags);
}
int unlink(const char *path) {
    step();
    return REAL("unlink", int (*)(const char *))(path);
}
int unlinkat(int dir, const char *path, int flags) {
    step();
    return REAL("unlinkat", int (*)(int, const char *, int))(dir, path, flags);
}
