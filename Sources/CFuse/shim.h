#ifndef VAULTAIRE_CFUSE_SHIM_H
#define VAULTAIRE_CFUSE_SHIM_H

#define FUSE_USE_VERSION 35
#include <fuse3/fuse.h>
#include <fuse3/fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <errno.h>
#include <fcntl.h>

// fuse_new and fuse_loop_mt are macros over versioned symbols; Swift calls these instead.
static inline struct fuse *CFuse_new(struct fuse_args *args, const struct fuse_operations *op, void *data) {
    return fuse_new(args, op, sizeof(struct fuse_operations), data);
}

static inline int CFuse_loop_mt(struct fuse *f, int max_idle_threads) {
    struct fuse_loop_config config = { .clone_fd = 0, .max_idle_threads = (unsigned)max_idle_threads };
    return fuse_loop_mt(f, &config);
}

static inline void *CFuse_private_data(void) {
    return fuse_get_context()->private_data;
}

static inline uid_t CFuse_caller_uid(void) { return fuse_get_context()->uid; }
static inline gid_t CFuse_caller_gid(void) { return fuse_get_context()->gid; }

static const long CFuse_UTIME_NOW = UTIME_NOW;
static const long CFuse_UTIME_OMIT = UTIME_OMIT;

#endif
