#ifndef VAULTAIRE_FUSE_RING_H
#define VAULTAIRE_FUSE_RING_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

// FUSE over io_uring (Linux 6.14+, when the fuse module's enable_uring parameter is on): instead of
// read() and write() on /dev/fuse, one thread per CPU hands the kernel buffers through an io_uring
// and gets each request on the CPU of the process that made it; one system call answers a request
// and waits for the next. The classic device loop keeps running beside it for what the kernel still
// sends there (INIT, FORGET, INTERRUPT).

// Serves one request: `request` holds it exactly as read() from /dev/fuse would have returned it.
typedef void (*vaultaire_ring_serve_fn)(void *context, void *request, size_t length);

// 1 if this kernel lets a FUSE server use io_uring (the module parameter reads Y and io_uring itself
// is not switched off).
int vaultaire_ring_kernel_allows(void);

// Sets up one ring per possible CPU (buffers for requests of up to `max_payload` bytes) and arms the
// INIT reply to ask for io_uring; the rings start serving once the kernel has the reply. Call before
// the device loop starts, in the process that will serve. Returns 0, or -errno (then nothing is
// asked of the kernel and the device loop serves everything).
int vaultaire_ring_prepare(int fuse_fd, size_t max_payload, vaultaire_ring_serve_fn serve, void *context);

// After the mount is gone: waits for the ring threads to end and wipes and frees their buffers.
void vaultaire_ring_finish(void);

// For the device hooks: the INIT reply's flags gain io_uring (returns 1 if it asked), and once the
// kernel has accepted that reply the rings start.
int vaultaire_ring_amend_init_reply(void *init_out, size_t length, unsigned long long kernel_offers);
void vaultaire_ring_init_reply_sent(void);

// For the device hooks: if this thread is serving a ring request, its reply goes into that request's
// buffers instead of to /dev/fuse. Returns 1 and sets `written` (as writev would) if it took the
// message, 0 for everything else (no ring request on this thread, or a notification).
int vaultaire_ring_take_reply(const struct iovec *iov, int count, ssize_t *written);

// Where a reply of `size` bytes to the ring request this thread serves can be built in place (the
// entry's payload buffer, which the reply is committed from); NULL when the thread serves none.
void *vaultaire_ring_reply_buffer(size_t size);

#endif
