#ifndef VAULTAIRE_RING_ENTRY_H
#define VAULTAIRE_RING_ENTRY_H

// One ring entry: the buffers the kernel fills with a request and takes the reply from, and the
// bounds checks between them and libfuse. No io_uring here (ring_workers.c submits the entries), so
// the checks are tested on their own (Tests/RingBoundsTests). Not part of the Swift module.

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "fuse_ring.h"
#include "fuse_ring_abi.h"

// Room in front of each payload to put the in-header and the opcode's argument back, so a request
// reaches libfuse contiguous, as read() would have returned it, without copying the payload.
enum { REBUILD_ROOM = 256 };

struct ring_entry {
    struct ring_request_header header;
    struct iovec iov[2];   // what the kernel is given: the header, then the payload
    char *area;            // REBUILD_ROOM bytes, then the payload the kernel fills
    size_t capacity;       // bytes of payload
    int replied;
    int small_read;        // a read of less than VAULTAIRE_STEERED_READ_LIMIT: steer its reply
};

// Sets up an entry over `area`, which holds REBUILD_ROOM + `capacity` bytes.
void ring_entry_init(struct ring_entry *e, char *area, size_t capacity);

// Puts the fetched request back together in front of its payload and lets `serve` handle it; the
// reply lands in the entry through ring_entry_take_reply. A request whose lengths do not add up, and
// one left unanswered, are answered EIO. Returns the id to commit.
uint64_t ring_entry_serve(struct ring_entry *e, vaultaire_ring_serve_fn serve, void *context);

// For the device hooks (vaultaire_wire_transport.take_reply): if this thread is serving an entry,
// its reply goes into that entry instead of to /dev/fuse. Returns 1 and sets `written` (as writev
// would: -1 with errno EINVAL if the reply does not fit) if it took the message, 0 for everything
// else (no entry served on this thread, or a notification).
int ring_entry_take_reply(void *unused, const struct iovec *iov, int count, ssize_t *written);

#endif
