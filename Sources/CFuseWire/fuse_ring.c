#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "caller_placement.h"
#include "fuse_ring.h"
#include "fuse_wire.h"

// The kernel's FUSE-over-io_uring ABI (protocol 7.42, Linux 6.14). Debian 12's <linux/fuse.h>
// predates it, so the layout is spelled out here exactly as the kernel defines it.
struct ring_entry_in_out {
    uint64_t flags;
    uint64_t commit_id;    // the request's unique id, echoed when committing the reply
    uint32_t payload_sz;   // bytes used in the payload buffer, in either direction
    uint32_t padding;
    uint64_t reserved;
};
struct ring_request_header {
    char in_out[128];      // fuse_in_header on fetch, fuse_out_header on commit
    char op_in[128];       // the opcode's fixed argument (fuse_write_in and the like)
    struct ring_entry_in_out entry;
};
struct ring_command {      // the 80-byte command area of a 128-byte SQE
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};
enum { RING_REGISTER = 1, RING_COMMIT_AND_FETCH = 2 };
#define INIT_FLAGS2_OVER_IO_URING (1u << 9)  // FUSE_OVER_IO_URING, bit 41 of the 64-bit INIT flags

// Each CPU's queue is served by a few threads pinned to that CPU, each with one entry: a request that
// waits for the disk holds up only its own thread, as with the device loop's threads. Measured
// against one thread with four entries and against unpinned threads (docs/PERFORMANCE.md, "FUSE over io_uring").
enum { WORKERS_PER_QUEUE = 4, ENTRIES_PER_WORKER = 1 };
// Room in front of each payload to put the in-header and the opcode's argument back, so a request
// reaches libfuse contiguous, as read() would have returned it, without copying the payload.
enum { REBUILD_ROOM = 256 };
static const uint64_t STOP_TAG = UINT64_MAX;

struct ring_entry {
    struct ring_request_header header;
    struct iovec iov[2];
    char *area;            // REBUILD_ROOM bytes, then the payload the kernel fills
    int replied;
    int small_read;        // a read of less than VAULTAIRE_STEERED_READ_LIMIT: steer its reply
};

struct ring_worker {
    struct io_uring ring;
    int ring_ready;
    unsigned qid;          // the CPU whose requests this worker serves
    pthread_t thread;
    int thread_started;
    int stop_fd;           // an eventfd: written when the mount is over, to end this worker's thread
    uint64_t stop_value;
    struct ring_entry entries[ENTRIES_PER_WORKER];
};

static struct {
    int fuse_fd;
    size_t payload;
    vaultaire_ring_serve_fn serve;
    void *context;
    unsigned worker_count;
    struct ring_worker *workers;
    int armed;             // prepared: may ask for io_uring in the INIT reply
    int asked;
    pthread_mutex_t lock;
    pthread_cond_t go;
    int released;          // 1: register with the kernel; -1: give up (mount over before INIT)
} rings = { .fuse_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER };

static __thread struct ring_entry *serving_entry;

int vaultaire_ring_kernel_allows(void) {
    char value[8] = {0};
    FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "r");
    if (!f) return 0;
    size_t n = fread(value, 1, sizeof value - 1, f);
    fclose(f);
    if (n == 0 || (value[0] != 'Y' && value[0] != '1')) return 0;
    int disabled = 0;
    f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
    if (f) {
        if (fscanf(f, "%d", &disabled) != 1) disabled = 0;
        fclose(f);
    }
    // 2 switches io_uring off; 1 keeps it for privileged users, and setting up the rings tells which we are.
    return disabled != 2;
}

// The kernel makes one queue per possible CPU and sends each request to the queue of the CPU its
// caller runs on; every queue must have an entry before any request goes through a ring.
static unsigned possible_cpus(void) {
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    if (!f) return 0;
    char text[256] = {0};
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    unsigned count = 0, highest = 0;
    char *p = text, *end = text + n;
    while (p < end && *p >= '0' && *p <= '9') {
        unsigned first = (unsigned)strtoul(p, &p, 10), last = first;
        if (*p == '-') last = (unsigned)strtoul(p + 1, &p, 10);
        if (last < first) return 0;
        count += last - first + 1;
        highest = last;
        if (*p == ',') p++;
    }
    // A gap in the numbering would leave a CPU number without a queue: not handled, no ring.
    return count == highest + 1 ? count : 0;
}

static void prepare_command(struct ring_worker *w, struct io_uring_sqe *sqe, unsigned index, uint32_t op,
                            uint64_t commit_id) {
    memset(sqe, 0, 2 * sizeof *sqe);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = rings.fuse_fd;
    sqe->cmd_op = op;
    sqe->addr = (uint64_t)(uintptr_t)w->entries[index].iov;
    sqe->len = 2;
    sqe->user_data = index;
    struct ring_command *command = (struct ring_command *)sqe->cmd;
    command->qid = (uint16_t)w->qid;
    command->commit_id = commit_id;
}

static void watch_stop(struct ring_worker *w) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
    memset(sqe, 0, 2 * sizeof *sqe);
    io_uring_prep_read(sqe, w->stop_fd, &w->stop_value, sizeof w->stop_value, 0);
    sqe->user_data = STOP_TAG;
}

static void answer_error(struct ring_entry *e, uint64_t unique, int error) {
    struct fuse_out_header out = { .len = sizeof out, .error = -error, .unique = unique };
    memcpy(e->header.in_out, &out, sizeof out);
    e->header.entry.payload_sz = 0;
}

// Puts the request back together in front of its payload and lets libfuse serve it; the reply lands
// in the entry through vaultaire_ring_take_reply. Returns the id to commit.
static uint64_t serve_entry(struct ring_entry *e) {
    struct fuse_in_header in;
    memcpy(&in, e->header.in_out, sizeof in);
    uint64_t commit_id = e->header.entry.commit_id;
    size_t payload = e->header.entry.payload_sz;
    if (in.len < sizeof in + payload || in.len - sizeof in - payload > sizeof e->header.op_in
        || payload > rings.payload) {
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
    rings.serve(rings.context, start, in.len);
    serving_entry = NULL;
    // Every request that comes through a ring expects an answer (FORGET, which has none, stays on
    // the device); one left unanswered would hold its caller forever.
    if (!e->replied) answer_error(e, commit_id, EIO);
    return commit_id;
}

// Commits replies to small reads now, from SCHED_IDLE, so that the reader stays on this CPU (see
// caller_placement.h); other replies go with the next wait.
static void hand_over_beside_caller(struct ring_worker *w) {
    if (!vaultaire_placement_wanted()) return;
    vaultaire_placement_drop();
    (void)io_uring_submit(&w->ring);
    vaultaire_placement_restore();
}

static void *worker_thread(void *arg) {
    struct ring_worker *w = arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(w->qid, &one);
    // Serving on the CPU the caller runs on is the point; if a cpuset forbids it, serve anyway.
    (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    (void)pthread_setname_np(pthread_self(), "vaultaire-ring");

    pthread_mutex_lock(&rings.lock);
    while (rings.released == 0) pthread_cond_wait(&rings.go, &rings.lock);
    int go = rings.released > 0;
    pthread_mutex_unlock(&rings.lock);
    if (!go) return NULL;

    for (unsigned i = 0; i < ENTRIES_PER_WORKER; i++)
        prepare_command(w, io_uring_get_sqe(&w->ring), i, RING_REGISTER, 0);
    watch_stop(w);
    int live = ENTRIES_PER_WORKER, stopping = 0;
    while (live > 0 && !stopping) {
        int replies = 0, small_reads = 0;
        int rc = io_uring_submit_and_wait(&w->ring, 1);
        if (rc < 0 && rc != -EINTR) break;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&w->ring, head, cqe) {
            seen++;
            if (cqe->user_data == STOP_TAG) { stopping = 1; continue; }
            unsigned index = (unsigned)cqe->user_data;
            if (cqe->res < 0 || index >= ENTRIES_PER_WORKER) {
                // ENOTCONN: the mount is gone; the entry is no longer the kernel's.
                live--;
                continue;
            }
            uint64_t commit_id = serve_entry(&w->entries[index]);
            prepare_command(w, io_uring_get_sqe(&w->ring), index, RING_COMMIT_AND_FETCH, commit_id);
            replies++;
            small_reads += w->entries[index].small_read;
        }
        io_uring_cq_advance(&w->ring, seen);
        if (replies > 0 && replies == small_reads && !stopping) hand_over_beside_caller(w);
    }
    return NULL;
}

static void release_workers(int how) {
    pthread_mutex_lock(&rings.lock);
    if (rings.released == 0) rings.released = how;
    pthread_cond_broadcast(&rings.go);
    pthread_mutex_unlock(&rings.lock);
}

static void free_workers(void) {
    for (unsigned i = 0; i < rings.worker_count; i++) {
        struct ring_worker *w = &rings.workers[i];
        if (w->ring_ready) io_uring_queue_exit(&w->ring);
        if (w->stop_fd >= 0) close(w->stop_fd);
        for (unsigned j = 0; j < ENTRIES_PER_WORKER; j++) {
            struct ring_entry *e = &w->entries[j];
            if (!e->area) continue;
            // Requests and replies passed through here: file contents and names in the clear.
            explicit_bzero(e->area, REBUILD_ROOM + rings.payload);
            munmap(e->area, REBUILD_ROOM + rings.payload);
        }
        explicit_bzero(w->entries, sizeof w->entries);
    }
    free(rings.workers);
    rings.workers = NULL;
    rings.worker_count = 0;
    rings.armed = 0;
}

int vaultaire_ring_prepare(int fuse_fd, size_t max_payload, vaultaire_ring_serve_fn serve, void *context) {
    unsigned cpus = possible_cpus();
    if (cpus == 0 || cpus > 4096) return -ENOTSUP;
    unsigned count = cpus * WORKERS_PER_QUEUE;
    rings.fuse_fd = fuse_fd;
    rings.payload = max_payload;
    rings.serve = serve;
    rings.context = context;
    (void)vaultaire_placement_prepare();
    rings.workers = calloc(count, sizeof *rings.workers);
    if (!rings.workers) return -ENOMEM;
    rings.worker_count = count;
    int err = 0;
    for (unsigned i = 0; i < count && !err; i++) {
        struct ring_worker *w = &rings.workers[i];
        w->qid = i % cpus;
        w->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (w->stop_fd < 0) { err = -errno; break; }
        // One SQE per entry plus the stop watch; 128-byte SQEs carry the FUSE command.
        int rc = io_uring_queue_init(ENTRIES_PER_WORKER + 1, &w->ring, IORING_SETUP_SQE128);
        if (rc < 0) { err = rc; break; }
        w->ring_ready = 1;
        for (unsigned j = 0; j < ENTRIES_PER_WORKER; j++) {
            struct ring_entry *e = &w->entries[j];
            void *area = mmap(NULL, REBUILD_ROOM + max_payload, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (area == MAP_FAILED) { err = -errno; break; }
            madvise(area, REBUILD_ROOM + max_payload, MADV_DONTDUMP);
            e->area = area;
            e->iov[0] = (struct iovec){ &e->header, sizeof e->header };
            e->iov[1] = (struct iovec){ e->area + REBUILD_ROOM, max_payload };
        }
    }
    // Threads start now, not at INIT, so that once the kernel is asked nothing can fail to start.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 0; i < count && !err; i++) {
        int rc = pthread_create(&rings.workers[i].thread, NULL, worker_thread, &rings.workers[i]);
        if (rc != 0) { err = -rc; break; }
        rings.workers[i].thread_started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        release_workers(-1);
        for (unsigned i = 0; i < count; i++)
            if (rings.workers[i].thread_started) pthread_join(rings.workers[i].thread, NULL);
        free_workers();
        return err;
    }
    rings.armed = 1;
    return 0;
}

int vaultaire_ring_amend_init_reply(void *init_out, size_t length, unsigned long long kernel_offers) {
    if (!rings.armed || rings.asked) return 0;
    if (!(kernel_offers & FUSE_INIT_EXT) || !((kernel_offers >> 32) & INIT_FLAGS2_OVER_IO_URING)) return 0;
    if (length < offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t)) return 0;
    struct fuse_init_out *reply = init_out;
    // The kernel sizes requests by these; each must fit an entry's payload buffer.
    if (reply->max_write > rings.payload || (size_t)reply->max_pages * 4096 > rings.payload) return 0;
    reply->flags |= FUSE_INIT_EXT;
    reply->flags2 |= INIT_FLAGS2_OVER_IO_URING;
    rings.asked = 1;
    return 1;
}

void vaultaire_ring_init_reply_sent(void) {
    if (rings.asked) release_workers(1);
}

void vaultaire_ring_finish(void) {
    if (!rings.workers) return;
    release_workers(-1);
    for (unsigned i = 0; i < rings.worker_count; i++) {
        struct ring_worker *w = &rings.workers[i];
        uint64_t one = 1;
        if (w->stop_fd >= 0) (void)!write(w->stop_fd, &one, sizeof one);
    }
    for (unsigned i = 0; i < rings.worker_count; i++)
        if (rings.workers[i].thread_started) pthread_join(rings.workers[i].thread, NULL);
    free_workers();
}

int vaultaire_ring_take_reply(const struct iovec *iov, int count, ssize_t *written) {
    struct ring_entry *e = serving_entry;
    if (!e || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header)) return 0;
    // A notification sent while serving (unique 0: "drop these cached attributes") is no reply; the
    // kernel takes notifications only through /dev/fuse.
    if (((const struct fuse_out_header *)iov[0].iov_base)->unique == 0) return 0;
    *written = -1;
    size_t used = 0;
    char *payload = e->area + REBUILD_ROOM;
    for (int i = 1; i < count; i++) {
        if (iov[i].iov_len > rings.payload - used) {
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
    if (!e || size > rings.payload) return NULL;
    return e->area + REBUILD_ROOM;
}
