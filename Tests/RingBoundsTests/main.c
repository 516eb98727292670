// The C transport's checks, exercised without a kernel: CFuseWire's INIT negotiation and set-ID
// flags, and CFuseRing's entry bounds (ring_entry.c) and placement cache. Run by
// Tests/TransportTests/RingBoundsTests.swift; prints each failed check, exits 1 if any failed.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "caller_placement.h"
#include "fuse_wire.h"
#include "ring_entry.h"

static int failures, checks;
#define CHECK(condition) do { \
    checks++; \
    if (!(condition)) { failures++; fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #condition); } \
} while (0)

// --- writev, interposed: what a loop thread reading the next request would see while the INIT
// reply is being written (the kernel may hand out requests as soon as it has the reply).

static int observe_at_writev, kills_seen_at_writev = -1, writev_calls;

static size_t request(void *buffer, uint32_t opcode, uint64_t unique, const void *op, size_t op_length) {
    struct fuse_in_header in = { .len = (uint32_t)(sizeof in + op_length), .opcode = opcode, .unique = unique };
    memcpy(buffer, &in, sizeof in);
    memcpy((char *)buffer + sizeof in, op, op_length);
    return sizeof in + op_length;
}

static int note_kills(uint32_t opcode, const void *op, size_t op_length) {
    char buffer[512];
    vaultaire_wire_note_request(buffer, request(buffer, opcode, 7, op, op_length));
    return vaultaire_wire_request_kills_setid();
}

static const struct fuse_write_in killing_write = { .size = 1, .write_flags = FUSE_WRITE_KILL_SUIDGID };
static const struct fuse_write_in plain_write_for_tests = { .size = 1 };

ssize_t writev(int fd, const struct iovec *iov, int count) {
    writev_calls++;
    if (observe_at_writev) kills_seen_at_writev = note_kills(FUSE_WRITE, &killing_write, sizeof killing_write);
    return syscall(SYS_writev, fd, iov, count);
}

// --- A transport that only watches the INIT negotiation.

static int amended, accepted;
static uint64_t offers_seen;

static int watch_amend(void *context, void *init_out, size_t length, uint64_t kernel_offers) {
    (void)context; (void)init_out; (void)length;
    amended++;
    offers_seen = kernel_offers;
    return 1;
}
static void watch_accepted(void *context) { (void)context; accepted++; }
static int take_nothing(void *context, const struct iovec *iov, int count, ssize_t *written) {
    (void)context; (void)iov; (void)count; (void)written;
    return 0;
}

static void test_wire(void) {
    int null_fd = open("/dev/null", O_WRONLY);
    // Before INIT has been answered, kill flags are not the filesystem's business.
    CHECK(note_kills(FUSE_WRITE, &killing_write, sizeof killing_write) == 0);
    char short_request[8] = {0};
    vaultaire_wire_note_request(short_request, sizeof short_request);
    CHECK(vaultaire_wire_request_kills_setid() == 0);

    vaultaire_wire_use_transport(&(struct vaultaire_wire_transport){
        .take_reply = take_nothing, .amend_init_reply = watch_amend, .init_reply_accepted = watch_accepted });
    uint64_t offers = FUSE_INIT_EXT | FUSE_HANDLE_KILLPRIV_V2 | ((uint64_t)1 << 41);
    struct fuse_init_in init = {
        .major = 7, .minor = 42, .flags = (uint32_t)offers, .flags2 = (uint32_t)(offers >> 32) };
    char buffer[512];
    vaultaire_wire_note_request(buffer, request(buffer, FUSE_INIT, 1, &init, sizeof init));

    struct fuse_out_header out = { .len = sizeof out + sizeof(struct fuse_init_out), .unique = 1 };
    struct fuse_init_out reply = { .major = 7, .minor = 38, .flags = FUSE_HANDLE_KILLPRIV | FUSE_ASYNC_READ };
    struct iovec iov[2] = { { &out, sizeof out }, { &reply, sizeof reply } };
    observe_at_writev = 1;
    CHECK(vaultaire_wire_writev(null_fd, iov, 2, NULL) == (ssize_t)(sizeof out + sizeof reply));
    observe_at_writev = 0;
    // The start-up race: the flag must be up before the reply reaches the kernel.
    CHECK(kills_seen_at_writev == 1);
    CHECK((reply.flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
    CHECK((reply.flags & FUSE_HANDLE_KILLPRIV) == 0);
    CHECK((reply.flags & FUSE_ASYNC_READ) != 0);
    CHECK(amended == 1 && offers_seen == offers);
    CHECK(accepted == 1);

    // Once negotiated: each kind of request that can ask, asked or not, and bodies too short to say.
    CHECK(note_kills(FUSE_WRITE, &killing_write, sizeof killing_write) == 1);
    struct fuse_write_in plain_write = { .size = 1 };
    CHECK(note_kills(FUSE_WRITE, &plain_write, sizeof plain_write) == 0);
    CHECK(note_kills(FUSE_WRITE, &killing_write, sizeof killing_write - 1) == 0);
    struct fuse_setattr_in chown = { .valid = FATTR_UID | FATTR_KILL_SUIDGID };
    CHECK(note_kills(FUSE_SETATTR, &chown, sizeof chown) == 1);
    CHECK(note_kills(FUSE_SETATTR, &chown, 8) == 0);
    struct fuse_open_in truncating_open = { .flags = O_TRUNC, .open_flags = FUSE_OPEN_KILL_SUIDGID };
    CHECK(note_kills(FUSE_OPEN, &truncating_open, sizeof truncating_open) == 1);
    CHECK(note_kills(FUSE_GETATTR, &killing_write, sizeof killing_write) == 0);
    vaultaire_wire_note_request(short_request, sizeof short_request);
    CHECK(vaultaire_wire_request_kills_setid() == 0);

    // INIT is negotiated once: a second reply with the same id goes out untouched.
    reply.flags = FUSE_HANDLE_KILLPRIV;
    CHECK(vaultaire_wire_writev(null_fd, iov, 2, NULL) == (ssize_t)(sizeof out + sizeof reply));
    CHECK(reply.flags == FUSE_HANDLE_KILLPRIV && amended == 1 && accepted == 1);
    vaultaire_wire_use_transport(NULL);
    close(null_fd);
}

// --- Ring entries: what the kernel fetched, served through the device hooks as libfuse would.

enum { CAPACITY = 4096 };
static struct ring_entry entry;
static char area[REBUILD_ROOM + CAPACITY];

enum reply_kind {
    NO_REPLY, REPLY_BYTES, REPLY_TOO_LARGE, REPLY_WHOLE_CAPACITY, REPLY_IN_PLACE, NOTIFY_ONLY, SHORT_HEADER
};
static struct {
    enum reply_kind kind;
    size_t reply_length;
    int calls;
    char seen[REBUILD_ROOM + CAPACITY];
    size_t seen_length;
    void *seen_at;
    int kills_setid;
    ssize_t written;
    int written_errno;
    void *buffer_for_capacity, *buffer_past_capacity;
} served;

static void serve(void *context, void *request, size_t length) {
    (void)context;
    served.calls++;
    served.seen_at = request;
    served.seen_length = length;
    memcpy(served.seen, request, length);
    served.kills_setid = vaultaire_wire_request_kills_setid();
    served.buffer_for_capacity = vaultaire_ring_reply_buffer(CAPACITY);
    served.buffer_past_capacity = vaultaire_ring_reply_buffer(CAPACITY + 1);
    const struct fuse_in_header *in = request;
    struct fuse_out_header out = { .unique = in->unique };
    static char bytes[CAPACITY + 64];
    memset(bytes, 'r', sizeof bytes);
    struct iovec iov[3] = { { &out, sizeof out }, { bytes, served.reply_length }, { bytes, 0 } };
    int count = 2;
    switch (served.kind) {
    case NO_REPLY: return;
    case REPLY_BYTES: break;
    case REPLY_TOO_LARGE: iov[1].iov_len = CAPACITY - 10; iov[2].iov_len = 11; count = 3; break;
    case REPLY_WHOLE_CAPACITY: iov[1].iov_len = CAPACITY - 10; iov[2].iov_len = 10; count = 3; break;
    case REPLY_IN_PLACE:
        memset(served.buffer_for_capacity, 'p', served.reply_length);
        iov[1].iov_base = served.buffer_for_capacity;
        break;
    case NOTIFY_ONLY: out.unique = 0; break;
    case SHORT_HEADER: iov[0].iov_len = sizeof out - 1; break;
    }
    out.len = (uint32_t)(sizeof out + iov[1].iov_len + (count == 3 ? iov[2].iov_len : 0));
    errno = 0;
    if (served.kind == NOTIFY_ONLY || served.kind == SHORT_HEADER) {
        ssize_t ignored;
        served.written = ring_entry_take_reply(NULL, iov, count, &ignored);  // not taken: goes to /dev/fuse
        return;
    }
    served.written = vaultaire_wire_writev(-1, iov, count, NULL);
    served.written_errno = errno;
}

// The kernel's side of a fetch: the in-header and the opcode's argument in the entry's header, the
// payload in its buffer. `length` is what the in-header claims (normally all three together).
static void fetch(uint32_t opcode, uint64_t commit_id, const void *op, size_t op_length, size_t payload,
                  uint32_t length) {
    ring_entry_init(&entry, area, CAPACITY);
    struct fuse_in_header in = { .len = length, .opcode = opcode, .unique = commit_id, .nodeid = 5 };
    memcpy(entry.header.in_out, &in, sizeof in);
    memcpy(entry.header.op_in, op, op_length);
    entry.header.entry.commit_id = commit_id;
    entry.header.entry.payload_sz = (uint32_t)payload;
    memset(area + REBUILD_ROOM, 'w', payload < CAPACITY ? payload : CAPACITY);
    memset(&served, 0, sizeof served);
}

static const struct fuse_out_header *answer(void) { return (const struct fuse_out_header *)entry.header.in_out; }

static int answered_eio(uint64_t commit_id) {
    return answer()->error == -EIO && answer()->unique == commit_id && entry.header.entry.payload_sz == 0;
}

static void test_entries(void) {
    vaultaire_wire_use_transport(&(struct vaultaire_wire_transport){ .take_reply = ring_entry_take_reply });
    size_t header = sizeof(struct fuse_in_header);

    // A small read, answered with 100 bytes: the request reaches libfuse whole, the reply lands.
    struct fuse_read_in small_read = { .offset = 8192, .size = 4096 };
    fetch(FUSE_READ, 11, &small_read, sizeof small_read, 0, (uint32_t)(header + sizeof small_read));
    served.kind = REPLY_BYTES; served.reply_length = 100;
    CHECK(ring_entry_serve(&entry, serve, NULL) == 11);
    CHECK(served.calls == 1 && served.seen_length == header + sizeof small_read);
    CHECK(((struct fuse_in_header *)served.seen)->opcode == FUSE_READ);
    CHECK(memcmp(served.seen + header, &small_read, sizeof small_read) == 0);
    CHECK(entry.small_read == 1);
    CHECK(served.written == (ssize_t)(sizeof(struct fuse_out_header) + 100));
    CHECK(answer()->unique == 11 && answer()->error == 0 && entry.header.entry.payload_sz == 100);
    CHECK(area[REBUILD_ROOM] == 'r' && area[REBUILD_ROOM + 99] == 'r');
    CHECK(served.buffer_for_capacity == area + REBUILD_ROOM && served.buffer_past_capacity == NULL);

    // A read-ahead-sized read is not steered; nor is a read whose argument is cut short.
    struct fuse_read_in large_read = { .size = VAULTAIRE_STEERED_READ_LIMIT };
    fetch(FUSE_READ, 12, &large_read, sizeof large_read, 0, (uint32_t)(header + sizeof large_read));
    served.kind = REPLY_BYTES;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(entry.small_read == 0 && served.calls == 1);
    fetch(FUSE_READ, 13, &small_read, 8, 0, (uint32_t)(header + 8));
    served.kind = REPLY_BYTES;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(entry.small_read == 0 && served.calls == 1 && served.seen_length == header + 8);

    // A write: argument and payload contiguous, in place (the payload is not copied), kill flag noted.
    fetch(FUSE_WRITE, 14, &killing_write, sizeof killing_write, 1000,
          (uint32_t)(header + sizeof killing_write + 1000));
    served.kind = REPLY_BYTES; served.reply_length = 0;
    CHECK(ring_entry_serve(&entry, serve, NULL) == 14);
    CHECK(served.seen_at == area + REBUILD_ROOM - sizeof killing_write - header);
    CHECK(served.seen_length == header + sizeof killing_write + 1000);
    CHECK(served.seen[header + sizeof killing_write] == 'w' && served.seen[served.seen_length - 1] == 'w');
    CHECK(served.kills_setid == 1);
    CHECK(answer()->error == 0 && entry.header.entry.payload_sz == 0);

    // Lengths that do not add up are answered EIO and never reach libfuse.
    fetch(FUSE_WRITE, 15, &plain_write_for_tests, sizeof plain_write_for_tests, 1000, (uint32_t)(header + 999));
    CHECK(ring_entry_serve(&entry, serve, NULL) == 15 && served.calls == 0 && answered_eio(15));
    fetch(FUSE_WRITE, 16, &plain_write_for_tests, sizeof plain_write_for_tests, 0, (uint32_t)(header - 1));
    CHECK(ring_entry_serve(&entry, serve, NULL) == 16 && served.calls == 0 && answered_eio(16));
    fetch(FUSE_WRITE, 17, &plain_write_for_tests, sizeof plain_write_for_tests, 0,
          (uint32_t)(header + sizeof entry.header.op_in + 1));  // an argument longer than its slot
    CHECK(ring_entry_serve(&entry, serve, NULL) == 17 && served.calls == 0 && answered_eio(17));
    fetch(FUSE_WRITE, 18, &plain_write_for_tests, sizeof plain_write_for_tests, CAPACITY + 1,
          (uint32_t)(header + sizeof plain_write_for_tests + CAPACITY + 1));  // a payload past the buffer
    CHECK(ring_entry_serve(&entry, serve, NULL) == 18 && served.calls == 0 && answered_eio(18));
    fetch(FUSE_WRITE, 19, &plain_write_for_tests, sizeof plain_write_for_tests, CAPACITY,
          (uint32_t)(header + sizeof plain_write_for_tests + CAPACITY));  // exactly full: served
    served.kind = REPLY_BYTES; served.reply_length = 0;
    CHECK(ring_entry_serve(&entry, serve, NULL) == 19 && served.calls == 1 && answer()->error == 0);
    fetch(FUSE_GETATTR, 20, &small_read, 0, 0, (uint32_t)header);  // no argument at all
    served.kind = REPLY_BYTES; served.reply_length = 0;
    CHECK(ring_entry_serve(&entry, serve, NULL) == 20 && served.calls == 1 && answer()->error == 0);

    // A request left unanswered is answered EIO, so that its caller is not held forever.
    fetch(FUSE_GETATTR, 21, &small_read, 0, 0, (uint32_t)header);
    served.kind = NO_REPLY;
    CHECK(ring_entry_serve(&entry, serve, NULL) == 21 && served.calls == 1 && answered_eio(21));

    // Replies: one byte past the buffer is refused (EINVAL) and becomes EIO; exactly full fits.
    fetch(FUSE_READ, 22, &small_read, sizeof small_read, 0, (uint32_t)(header + sizeof small_read));
    served.kind = REPLY_TOO_LARGE;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(served.written == -1 && served.written_errno == EINVAL && answered_eio(22));
    fetch(FUSE_READ, 23, &small_read, sizeof small_read, 0, (uint32_t)(header + sizeof small_read));
    served.kind = REPLY_WHOLE_CAPACITY;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(served.written == (ssize_t)(sizeof(struct fuse_out_header) + CAPACITY));
    CHECK(answer()->error == 0 && entry.header.entry.payload_sz == CAPACITY);

    // A reply built in the entry's own buffer stays where it is.
    fetch(FUSE_READ, 24, &small_read, sizeof small_read, 0, (uint32_t)(header + sizeof small_read));
    served.kind = REPLY_IN_PLACE; served.reply_length = 3000;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(entry.header.entry.payload_sz == 3000 && area[REBUILD_ROOM] == 'p' && area[REBUILD_ROOM + 2999] == 'p');

    // A notification sent while serving is no reply: not taken, and the request still needs one.
    fetch(FUSE_WRITE, 25, &plain_write_for_tests, sizeof plain_write_for_tests, 0,
          (uint32_t)(header + sizeof plain_write_for_tests));
    served.kind = NOTIFY_ONLY;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(served.written == 0 && answered_eio(25));

    // A reply whose header is cut short is not taken either.
    fetch(FUSE_GETATTR, 26, &small_read, 0, 0, (uint32_t)header);
    served.kind = SHORT_HEADER;
    ring_entry_serve(&entry, serve, NULL);
    CHECK(served.written == 0 && answered_eio(26));

    // Outside a ring request nothing is taken and there is no reply buffer.
    struct fuse_out_header out = { .unique = 9 };
    struct iovec iov[1] = { { &out, sizeof out } };
    ssize_t written = 0;
    CHECK(ring_entry_take_reply(NULL, iov, 1, &written) == 0);
    CHECK(vaultaire_ring_reply_buffer(1) == NULL);
    vaultaire_wire_use_transport(NULL);
}

// --- The placement check's cache: /proc/loadavg is looked at again only after the recheck interval.

static void write_loadavg(int fd, const char *text) {
    CHECK(pwrite(fd, text, strlen(text), 0) == (ssize_t)strlen(text));
    CHECK(ftruncate(fd, (off_t)strlen(text)) == 0);
}

static void test_placement_cache(void) {
    char path[] = "/tmp/vaultaire-loadavg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    struct vaultaire_placement placement = { .loadavg_fd = fd };
    struct vaultaire_placement_sample sample = {0};
    CHECK(vaultaire_placement_wanted(&placement, &sample) == 0);  // not usable: never steered
    atomic_store(&placement.usable, 1);
    write_loadavg(fd, "0.10 0.20 0.30 1/250 4242\n");
    CHECK(vaultaire_placement_wanted(&placement, &sample) == 1);
    write_loadavg(fd, "0.10 0.20 0.30 3/250 4242\n");
    CHECK(vaultaire_placement_wanted(&placement, &sample) == 1);  // within the interval: the last look holds
    sample.checked_ns -= VAULTAIRE_PLACEMENT_RECHECK_NS;
    CHECK(vaultaire_placement_wanted(&placement, &sample) == 0);  // looked again: others are runnable
    write_loadavg(fd, "garbage\n");
    sample.checked_ns -= VAULTAIRE_PLACEMENT_RECHECK_NS;
    CHECK(vaultaire_placement_wanted(&placement, &sample) == 0);  // unreadable: not steered
    close(fd);
}

int main(void) {
    test_wire();  // first: INIT is negotiated once per process
    test_entries();
    test_placement_cache();
    printf("%d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
