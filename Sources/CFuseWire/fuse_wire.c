#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "fuse_wire.h"

// INIT is the first request and is answered before any other is read, so these need no lock.
static uint64_t init_unique;
static int init_seen;
static uint32_t kernel_offers;
static volatile int killpriv_v2_accepted;

static __thread int request_kills_setid;

static int kills_setid(const struct fuse_in_header *in, const void *body, size_t body_len) {
    switch (in->opcode) {
    case FUSE_WRITE:
        if (body_len < sizeof(struct fuse_write_in)) return 0;
        return (((const struct fuse_write_in *)body)->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
    case FUSE_SETATTR:
        if (body_len < sizeof(struct fuse_setattr_in)) return 0;
        return (((const struct fuse_setattr_in *)body)->valid & FATTR_KILL_SUIDGID) != 0;
    case FUSE_OPEN:
        if (body_len < sizeof(struct fuse_open_in)) return 0;
        return (((const struct fuse_open_in *)body)->open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
    default:
        return 0;
    }
}

ssize_t vaultaire_wire_read(int fd, void *buf, size_t len, void *userdata) {
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    request_kills_setid = 0;
    if (n < (ssize_t)sizeof(struct fuse_in_header)) return n;
    const struct fuse_in_header *in = buf;
    const void *body = (const char *)buf + sizeof *in;
    size_t body_len = (size_t)n - sizeof *in;
    if (in->opcode == FUSE_INIT && !init_seen && body_len >= 16) {
        // major, minor, max_readahead, flags: the flags word is where HANDLE_KILLPRIV_V2 lives.
        const struct fuse_init_in *init = body;
        init_unique = in->unique;
        kernel_offers = init->flags;
        init_seen = 1;
    } else if (killpriv_v2_accepted) {
        request_kills_setid = kills_setid(in, body, body_len);
    }
    return n;
}

ssize_t vaultaire_wire_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    if (init_seen && !killpriv_v2_accepted && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
        const struct fuse_out_header *out = iov[0].iov_base;
        if (out->unique == init_unique && out->error == 0 && iov[1].iov_len >= 16
            && (kernel_offers & FUSE_HANDLE_KILLPRIV_V2)) {
            struct fuse_init_out *reply = iov[1].iov_base;
            // V2 replaces V1: the kernel then sends explicit kill flags and stops asking for
            // security.capability before each write of an inode it has already checked.
            reply->flags = (reply->flags & ~(uint32_t)FUSE_HANDLE_KILLPRIV) | FUSE_HANDLE_KILLPRIV_V2;
            ssize_t n = writev(fd, iov, count);
            if (n >= 0) killpriv_v2_accepted = 1;
            return n;
        }
    }
    return writev(fd, iov, count);
}

int vaultaire_wire_request_kills_setid(void) { return request_kills_setid; }
