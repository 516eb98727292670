#ifndef VAULTAIRE_FUSE_RING_H
#define VAULTAIRE_FUSE_RING_H

#include <stddef.h>

// FUSE over io_uring (Linux 6.14+, when the fuse module's enable_uring parameter is on): instead of
// read() and write() on /dev/fuse, threads pinned to each CPU hand the kernel buffers through an
// io_uring and get each request on the CPU of the process that made it; one system call answers a
// request and waits for the next. The classic device loop keeps running beside it for what the
// kernel still sends there (INIT, FORGET, INTERRUPT). Plugged into CFuseWire's device hooks as a
// second transport; a mount without it never enters this code.

// Serves one request: `request` holds it exactly as read() from /dev/fuse would have returned it.
typedef void (*vaultaire_ring_serve_fn)(void *context, void *request, size_t length);

// The rings of one mount: their threads, buffers and kernel negotiation.
struct vaultaire_rings;

// 1 if this kernel lets a FUSE server use io_uring (the module parameter reads Y and io_uring itself
// is not switched off).
int vaultaire_ring_kernel_allows(void);

// Sets up the rings (buffers for requests of up to `max_payload` bytes, one queue per possible CPU),
// starts their threads and plugs them into the device hooks, so that the INIT reply asks for io_uring;
// the rings start serving once the kernel has that reply. Call before the device loop starts, in the
// process that will serve. NULL if they cannot be set up: then nothing is asked of the kernel and the
// device loop serves everything.
struct vaultaire_rings *vaultaire_ring_prepare(int fuse_fd, size_t max_payload, vaultaire_ring_serve_fn serve,
                                               void *context);

// After the device loop has ended and the mount is gone: waits for the ring threads to end, unplugs
// the rings from the device hooks, and wipes and frees their buffers. NULL: nothing to do.
void vaultaire_ring_finish(struct vaultaire_rings *rings);

// Where a reply of `size` bytes to the ring request this thread serves can be built in place (the
// entry's payload buffer, which the reply is committed from); NULL when the thread serves none.
void *vaultaire_ring_reply_buffer(size_t size);

#endif
