#ifndef VAULTAIRE_CFUSE_SHIM_H
#define VAULTAIRE_CFUSE_SHIM_H

#define FUSE_USE_VERSION 35
#include <fuse3/fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <errno.h>
#include <fcntl.h>

// fuse_session_loop_mt is a macro over versioned symbols; Swift calls this instead.
static inline int CFuse_session_loop_mt(struct fuse_session *se, int max_idle_threads) {
    struct fuse_loop_config config = { .clone_fd = 0, .max_idle_threads = (unsigned)max_idle_threads };
    return fuse_session_loop_mt(se, &config);
}

static const long CFuse_UTIME_NOW = UTIME_NOW;
static const long CFuse_UTIME_OMIT = UTIME_OMIT;

#endif
