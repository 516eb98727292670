#ifndef VAULTAIRE_SYSTEM_SHIMS_H
#define VAULTAIRE_SYSTEM_SHIMS_H

/// syncfs(2), hidden from Swift behind _GNU_SOURCE.
int vaultaire_syncfs(int fd);
/// sync_file_range: starts writing a range to disk (length 0: to the end of the file) and, with
/// `wait`, also waits for it (before and after); 0 on success, -1 with errno set.
int vaultaire_write_back(int fd, long long offset, long long length, int wait);
/// fallocate(2), hidden from Swift behind _GNU_SOURCE: `mode` is FALLOC_FL_* (KEEP_SIZE reserves host
/// space without changing the file's length; KEEP_SIZE | PUNCH_HOLE frees it).
int vaultaire_fallocate(int fd, int mode, long long offset, long long length);
/// The FALLOC_FL_* values this program uses, for Swift (linux/falloc.h is not in the Glibc module).
enum {
    VAULTAIRE_FALLOC_KEEP_SIZE = 0x01,
    VAULTAIRE_FALLOC_PUNCH_HOLE = 0x02,
};
/// The f_type of fstatfs(2) for the filesystem holding `fd` (struct statfs is not in the Glibc
/// module), or -1 with errno set.
long long vaultaire_filesystem_type(int fd);
/// prctl(PR_SET_DUMPABLE, 0): no core dumps, no ptrace by same-uid processes. prctl is variadic.
int vaultaire_disable_core_dumps(void);
// Names the calling thread and lets it run on every CPU the process may use: a thread started while
// serving a request on a CPU-pinned io_uring worker would otherwise inherit that one CPU.
void vaultaire_background_thread(const char *name);
/// Drops the calling thread to SCHED_IDLE and nice 19 (a background thread that must not slow the
/// requests it follows); 0 if either took, -1 otherwise.
int vaultaire_idle_priority(void);
/// Sets the calling thread's nice value (only ever raised: an unprivileged thread cannot lower it
/// again); 0 on success, -1 with errno set.
int vaultaire_thread_nice(int nice);

/// A listening stream socket in the abstract namespace (no file: it goes with the process), or -1.
int vaultaire_abstract_listen(const char *name);
/// Connects to a listening abstract stream socket; the descriptor, or -1 with errno set.
int vaultaire_abstract_connect(const char *name);
/// The user ID of the process at the other end of a connected unix socket, or -1.
long long vaultaire_peer_uid(int fd);

/// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: `path` is resolved beneath `dirfd` and no
/// component of it may be a symbolic link (ELOOP) or leave the directory (EXDEV). glibc 2.36 has no
/// wrapper, so this is the raw system call.
int vaultaire_open_beneath(int dirfd, const char *path, int flags, unsigned int mode);
/// open(directory, O_TMPFILE | O_WRONLY): a file with no name, or -1 (errno EOPNOTSUPP where the
/// filesystem has no such files).
int vaultaire_open_unnamed(const char *directory, unsigned int mode);
/// Gives the unnamed file open as `fd` the name `path` (linkat through /proc/self/fd).
int vaultaire_name_unnamed(int fd, const char *path);

#endif
