#ifndef VAULTAIRE_FUSE_WIRE_H
#define VAULTAIRE_FUSE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

// Read and write the FUSE device on libfuse's behalf (installed with fuse_session_custom_io).
// libfuse 3.14 cannot negotiate FUSE_HANDLE_KILLPRIV_V2, which spares the kernel a getxattr
// round trip before writes; these add it to the INIT reply when the kernel offers it, and note
// which requests ask the filesystem to clear set-user-ID and set-group-ID bits.
ssize_t vaultaire_wire_read(int fd, void *buf, size_t len, void *userdata);
ssize_t vaultaire_wire_writev(int fd, struct iovec *iov, int count, void *userdata);

// Notes what the device hooks need from a request (INIT's offers, set-ID flags); the device reader
// calls it for every request it reads, a second transport for every request it serves.
void vaultaire_wire_note_request(const void *request, size_t length);

// 1 if the request being served on this thread (write, truncating setattr or open, chown) asks
// the filesystem to clear set-ID bits. libfuse serves a request on the thread that read it.
int vaultaire_wire_request_kills_setid(void);

// The inode number (FUSE node ID) the request being served on this thread is about: for naming the
// file in the log when the request fails.
uint64_t vaultaire_wire_request_node(void);

// The mount's own read-ahead window, set once the kernel has taken the INIT reply (the reply's
// max_readahead can only shrink the window, and the kernel applies it then): `path` names the
// mount's /sys/class/bdi/<device>/read_ahead_kb. Without the right to write there (an unprivileged
// mount) the kernel's window stays. Call before the device loop starts.
void vaultaire_wire_set_read_ahead_after_init(const char *path, unsigned kib);

// A second transport beside /dev/fuse (FUSE over io_uring: CFuseRing) plugs in here, so that this
// target never depends on it: it takes the replies to the requests it serves, and joins the INIT
// negotiation. Without one, the device hooks are all there is.
struct vaultaire_wire_transport {
    void *context;
    // Takes the reply to a request this thread serves through the transport: 1, with `written` set as
    // writev would, or 0 for everything else (no such request on this thread, or a notification).
    int (*take_reply)(void *context, const struct iovec *iov, int count, ssize_t *written);
    // Amends the INIT reply (a struct fuse_init_out of `length` bytes) before it is written; 1 if it
    // asked the kernel for something.
    int (*amend_init_reply)(void *context, void *init_out, size_t length, uint64_t kernel_offers);
    // The kernel accepted an INIT reply that amend_init_reply amended.
    void (*init_reply_accepted)(void *context);
};

// Installs a copy of `transport` (NULL removes it). Call while no request is served: before the
// device loop starts, and after it and the transport's own threads have ended.
void vaultaire_wire_use_transport(const struct vaultaire_wire_transport *transport);

#endif
