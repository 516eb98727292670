#include <errno.h>
#include <linux/fuse.h>
#include <string.h>
#include "caller_placement.h"
#include "fuse_wire.h"
#include "ring_entry.h"

// The entry this thread serves. Thread-local, not passed: libfuse replies through the device hook
// (vaultaire_wire_writev) on the thread that serves the request, with nothing of ours in hand.
static __thread struct ring_entry *serving_entry;

void ring_entry_init(struct ring_entry *e, char *area, size_t capacity) {
    memset(e, 0, sizeof *e);
    e->area = area;
    e->capacity = capacity;
    e->iov[0] = (struct iovec){ &e->header, sizeof e->header };
    e->iov[1] = (struct iovec){ area + REBUILD_ROOM, capacity };
}

static void answer_error(struct ring_entry *e, uint64_t unique, int error) {
    struct fuse_out_header out = { .len = sizeof out, .error = -error, .unique = unique };
    memcpy(e->header.in_out, &out, sizeof out);
    e->header.entry.payload_sz = 0;
}

uint64_t ring_entry_serve(struct ring_entry *e, vaultaire_ring_serve_fn serve, void *context) {
    struct fuse_in_header in;
    memcpy(&in, e->header.in_out, sizeof in);
    uint64_t commit_id = e->header.entry.commit_id;
    size_t payload = e->header.entry.payload_sz;
    e->small_read = 0;
    if (in.len < sizeof in + payload || in.len - sizeof in - payload > sizeof e->header.op_in
        || payload > e->capacity) {
        answer_error(e, commit_id, EIO);
        return commit_id;
    }
    size_t op_length = in.len - sizeof in - payload;
    e->small_read = in.opcode == FUSE_READ && op_length >= sizeof(struct fuse_read_in)
        && ((const struct fuse_read_in *)e->header.op_in)->size < VAULTAIRE_STEERED_READ_LIMIT;
    char *start = e->area + REBUILD_ROOM - op_length - sizeof in;
    memcpy(start, &in, sizeof in);
    memcpy(start + sizeof in, e->header.op_in, op_length);
    e->replied = 0;
    serving_entry = e;
    vaultaire_wire_note_request(start, in.len);
    serve(context, start, in.len);
    serving_entry = NULL;
    // Every request that comes through a ring expects an answer (FORGET, which has none, stays on
    // the device); one left unanswered would hold its caller forever.
    if (!e->replied) answer_error(e, commit_id, EIO);
    return commit_id;
}

int ring_entry_take_reply(void *unused, const struct iovec *iov, int count, ssize_t *written) {
    (void)unused;
    struct ring_entry *e = serving_entry;
    if (!e || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return 0;
    // A notification sent while serving (unique 0: "drop these cached attributes") is no reply; the
    // kernel takes notifications only through /dev/fuse.
    if (((const struct fuse_out_header *)iov[0].iov_base)->unique == 0) return 0;
    *written = -1;
    size_t used = 0;
    char *payload = e->area + REBUILD_ROOM;
    for (int i = 1; i < count; i++) {
        if (iov[i].iov_len > e->capacity - used) {
            errno = EINVAL;
            return 1;
        }
        // A read reply was made in place (vaultaire_ring_reply_buffer): nothing to copy.
        if (iov[i].iov_base != payload + used) memcpy(payload + used, iov[i].iov_base, iov[i].iov_len);
        used += iov[i].iov_len;
    }
    memcpy(e->header.in_out, iov[0].iov_base, sizeof(struct fuse_out_header));
    e->header.entry.payload_sz = (uint32_t)used;
    e->replied = 1;
    *written = (ssize_t)(iov[0].iov_len + used);
    return 1;
}

void *vaultaire_ring_reply_buffer(size_t size) {
    struct ring_entry *e = serving_entry;
    if (!e || size > e->capacity) return NULL;
    return e->area + REBUILD_ROOM;
}
