#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "fuse_wire.h"

// Process-wide state, not a context passed around: libfuse hands the device hooks (fuse_custom_io)
// only the session's user data, which is the file system's, and a process serves one mount.
// INIT is the first request and is answered before any other is read, so the INIT fields need no
// lock; the KILLPRIV_V2 flag is read by every loop thread, hence atomic.
static uint64_t init_unique;
static int init_seen, init_answered;
static uint64_t kernel_offers;  // INIT's flags, with flags2 as the high half when FUSE_INIT_EXT is set
static atomic_int killpriv_v2_accepted;
static struct vaultaire_wire_transport transport;  // all zero: none

static __thread int request_kills_setid;
static __thread uint64_t request_node;

static char read_ahead_path[256];
static unsigned read_ahead_kib;

void vaultaire_wire_set_read_ahead_after_init(const char *path, unsigned kib) {
    if (snprintf(read_ahead_path, sizeof read_ahead_path, "%s", path) >= (int)sizeof read_ahead_path) return;
    read_ahead_kib = kib;
}

void vaultaire_wire_use_transport(const struct vaultaire_wire_transport *replacement) {
    if (replacement) transport = *replacement;
    else memset(&transport, 0, sizeof transport);
}

static void set_read_ahead(void) {
    if (read_ahead_kib == 0) return;
    int fd = open(read_ahead_path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    char text[16];
    int n = snprintf(text, sizeof text, "%u\n", read_ahead_kib);
    (void)!write(fd, text, (size_t)n);
    close(fd);
}

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

void vaultaire_wire_note_request(const void *request, size_t length) {
    request_kills_setid = 0;
    request_node = 0;
    if (length < sizeof(struct fuse_in_header)) return;
    const struct fuse_in_header *in = request;
    request_node = in->nodeid;
    const void *body = (const char *)request + sizeof *in;
    size_t body_len = length - sizeof *in;
    if (in->opcode == FUSE_INIT && !init_seen && body_len >= 16) {
        // major, minor, max_readahead, flags, then (protocol 7.36+) flags2.
        const struct fuse_init_in *init = body;
        init_unique = in->unique;
        kernel_offers = init->flags;
        if ((init->flags & FUSE_INIT_EXT) && body_len >= 20) kernel_offers |= (uint64_t)init->flags2 << 32;
        init_seen = 1;
    } else if (atomic_load_explicit(&killpriv_v2_accepted, memory_order_acquire)) {
        request_kills_setid = kills_setid(in, body, body_len);
    }
}

ssize_t vaultaire_wire_read(int fd, void *buf, size_t len, void *userdata) {
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    vaultaire_wire_note_request(buf, n > 0 ? (size_t)n : 0);
    return n;
}

ssize_t vaultaire_wire_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    ssize_t taken;
    if (transport.take_reply && transport.take_reply(transport.context, iov, count, &taken)) return taken;
    if (init_seen && !init_answered && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
        const struct fuse_out_header *out = iov[0].iov_base;
        if (out->unique == init_unique && out->error == 0 && iov[1].iov_len >= 16) {
            struct fuse_init_out *reply = iov[1].iov_base;
            int killpriv_v2 = (kernel_offers & FUSE_HANDLE_KILLPRIV_V2) != 0;
            if (killpriv_v2) {
                // V2 replaces V1: the kernel then sends explicit kill flags and stops asking for
                // security.capability before each write of an inode it has already checked.
                reply->flags = (reply->flags & ~(uint32_t)FUSE_HANDLE_KILLPRIV) | FUSE_HANDLE_KILLPRIV_V2;
                // Before the reply goes out: once the kernel has it, any loop thread may read a
                // request carrying kill flags, and must obey them.
                atomic_store_explicit(&killpriv_v2_accepted, 1, memory_order_release);
            }
            int amended = transport.amend_init_reply
                && transport.amend_init_reply(transport.context, reply, iov[1].iov_len, kernel_offers);
            ssize_t n = writev(fd, iov, count);
            if (n >= 0) {
                init_answered = 1;
                if (amended && transport.init_reply_accepted) transport.init_reply_accepted(transport.context);
                set_read_ahead();
            } else {
                atomic_store_explicit(&killpriv_v2_accepted, 0, memory_order_release);  // the kernel has no reply
            }
            return n;
        }
    }
    return writev(fd, iov, count);
}

int vaultaire_wire_request_kills_setid(void) { return request_kills_setid; }

uint64_t vaultaire_wire_request_node(void) { return request_node; }
