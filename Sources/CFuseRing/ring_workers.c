#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "caller_placement.h"
#include "fuse_ring.h"
#include "fuse_wire.h"
#include "ring_entry.h"
#include "ring_kernel.h"

// The rings' threads: each registers its entries with the kernel, serves what it fetches
// (ring_entry.c) and commits the reply with the next fetch. Set up before the device loop starts,
// released once the kernel has accepted the INIT reply that asked for io_uring.

// Each CPU's queue is served by a few threads pinned to that CPU, each with one entry: a request that
// waits for the disk holds up only its own thread, as with the device loop's threads. Measured
// against one thread with four entries and against unpinned threads (docs/PERFORMANCE.md, "FUSE over io_uring").
enum { WORKERS_PER_QUEUE = 4, ENTRIES_PER_WORKER = 1 };
static const uint64_t STOP_TAG = UINT64_MAX;

struct ring_worker {
    struct vaultaire_rings *rings;
    struct io_uring ring;
    int ring_ready;
    unsigned qid;          // the CPU whose requests this worker serves
    pthread_t thread;
    int thread_started;
    int stop_fd;           // an eventfd: written when the mount is over, to end this worker's thread
    uint64_t stop_value;
    struct vaultaire_placement_sample placement_sample;
    struct ring_entry entries[ENTRIES_PER_WORKER];
};

struct vaultaire_rings {
    int fuse_fd;
    size_t payload;
    vaultaire_ring_serve_fn serve;
    void *context;
    unsigned worker_count;
    struct ring_worker *workers;
    struct vaultaire_placement placement;
    int asked;             // the INIT reply asked for io_uring (only the device loop's INIT thread writes it)
    pthread_mutex_t lock;
    pthread_cond_t go;
    int released;          // under lock. 1: register with the kernel; -1: give up (mount over before INIT)
};

static void prepare_command(struct ring_worker *w, struct io_uring_sqe *sqe, unsigned index, uint32_t op,
                            uint64_t commit_id) {
    memset(sqe, 0, 2 * sizeof *sqe);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = w->rings->fuse_fd;
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

// Commits replies to small reads now, from SCHED_IDLE, so that the reader stays on this CPU (see
// caller_placement.h); other replies go with the next wait.
static void hand_over_beside_caller(struct ring_worker *w) {
    struct vaultaire_placement *placement = &w->rings->placement;
    if (!vaultaire_placement_wanted(placement, &w->placement_sample)) return;
    vaultaire_placement_drop();
    (void)io_uring_submit(&w->ring);
    vaultaire_placement_restore(placement);
}

static void *worker_thread(void *arg) {
    struct ring_worker *w = arg;
    struct vaultaire_rings *rings = w->rings;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(w->qid, &one);
    // Serving on the CPU the caller runs on is the point; if a cpuset forbids it, serve anyway.
    (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    (void)pthread_setname_np(pthread_self(), "vaultaire-ring");

    pthread_mutex_lock(&rings->lock);
    while (rings->released == 0) pthread_cond_wait(&rings->go, &rings->lock);
    int go = rings->released > 0;
    pthread_mutex_unlock(&rings->lock);
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
            uint64_t commit_id = ring_entry_serve(&w->entries[index], rings->serve, rings->context);
            prepare_command(w, io_uring_get_sqe(&w->ring), index, RING_COMMIT_AND_FETCH, commit_id);
            replies++;
            small_reads += w->entries[index].small_read;
        }
        io_uring_cq_advance(&w->ring, seen);
        if (replies > 0 && replies == small_reads && !stopping) hand_over_beside_caller(w);
    }
    return NULL;
}

static void release_workers(struct vaultaire_rings *rings, int how) {
    pthread_mutex_lock(&rings->lock);
    if (rings->released == 0) rings->released = how;
    pthread_cond_broadcast(&rings->go);
    pthread_mutex_unlock(&rings->lock);
}

static void join_workers(struct vaultaire_rings *rings) {
    for (unsigned i = 0; i < rings->worker_count; i++)
        if (rings->workers[i].thread_started) pthread_join(rings->workers[i].thread, NULL);
}

static void free_rings(struct vaultaire_rings *rings) {
    for (unsigned i = 0; i < rings->worker_count; i++) {
        struct ring_worker *w = &rings->workers[i];
        if (w->ring_ready) io_uring_queue_exit(&w->ring);
        if (w->stop_fd >= 0) close(w->stop_fd);
        for (unsigned j = 0; j < ENTRIES_PER_WORKER; j++) {
            struct ring_entry *e = &w->entries[j];
            if (!e->area) continue;
            // Requests and replies passed through here: file contents and names in the clear.
            explicit_bzero(e->area, REBUILD_ROOM + rings->payload);
            munmap(e->area, REBUILD_ROOM + rings->payload);
        }
        explicit_bzero(w->entries, sizeof w->entries);
    }
    free(rings->workers);
    vaultaire_placement_close(&rings->placement);
    pthread_mutex_destroy(&rings->lock);
    pthread_cond_destroy(&rings->go);
    free(rings);
}

// The device hooks' side (vaultaire_wire_transport): the INIT reply's flags gain io_uring, and once
// the kernel has accepted that reply the rings start.
static int amend_init_reply(void *context, void *init_out, size_t length, uint64_t kernel_offers) {
    struct vaultaire_rings *rings = context;
    if (rings->asked) return 0;
    if (!(kernel_offers & FUSE_INIT_EXT) || !((kernel_offers >> 32) & INIT_FLAGS2_OVER_IO_URING)) return 0;
    if (length < offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t)) return 0;
    struct fuse_init_out *reply = init_out;
    // The kernel sizes requests by these; each must fit an entry's payload buffer.
    if (reply->max_write > rings->payload || (size_t)reply->max_pages * 4096 > rings->payload) return 0;
    reply->flags |= FUSE_INIT_EXT;
    reply->flags2 |= INIT_FLAGS2_OVER_IO_URING;
    rings->asked = 1;
    return 1;
}

static void init_reply_accepted(void *context) { release_workers(context, 1); }

struct vaultaire_rings *vaultaire_ring_prepare(int fuse_fd, size_t max_payload, vaultaire_ring_serve_fn serve,
                                               void *context) {
    unsigned cpus = ring_possible_cpus();
    if (cpus == 0 || cpus > 4096) return NULL;
    unsigned count = cpus * WORKERS_PER_QUEUE;
    struct vaultaire_rings *rings = calloc(1, sizeof *rings);
    if (!rings) return NULL;
    rings->fuse_fd = fuse_fd;
    rings->payload = max_payload;
    rings->serve = serve;
    rings->context = context;
    pthread_mutex_init(&rings->lock, NULL);
    pthread_cond_init(&rings->go, NULL);
    (void)vaultaire_placement_prepare(&rings->placement);
    rings->workers = calloc(count, sizeof *rings->workers);
    if (!rings->workers) {
        free_rings(rings);
        return NULL;
    }
    rings->worker_count = count;
    int err = 0;
    for (unsigned i = 0; i < count; i++) rings->workers[i].stop_fd = -1;
    for (unsigned i = 0; i < count && !err; i++) {
        struct ring_worker *w = &rings->workers[i];
        w->rings = rings;
        w->qid = i % cpus;
        w->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (w->stop_fd < 0) { err = -errno; break; }
        // One SQE per entry plus the stop watch; 128-byte SQEs carry the FUSE command.
        int rc = io_uring_queue_init(ENTRIES_PER_WORKER + 1, &w->ring, IORING_SETUP_SQE128);
        if (rc < 0) { err = rc; break; }
        w->ring_ready = 1;
        for (unsigned j = 0; j < ENTRIES_PER_WORKER; j++) {
            void *area = mmap(NULL, REBUILD_ROOM + max_payload, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (area == MAP_FAILED) { err = -errno; break; }
            madvise(area, REBUILD_ROOM + max_payload, MADV_DONTDUMP);
            ring_entry_init(&w->entries[j], area, max_payload);
        }
    }
    // Threads start now, not at INIT, so that once the kernel is asked nothing can fail to start.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 0; i < count && !err; i++) {
        int rc = pthread_create(&rings->workers[i].thread, NULL, worker_thread, &rings->workers[i]);
        if (rc != 0) { err = -rc; break; }
        rings->workers[i].thread_started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        release_workers(rings, -1);
        join_workers(rings);
        free_rings(rings);
        return NULL;
    }
    vaultaire_wire_use_transport(&(struct vaultaire_wire_transport){
        .context = rings,
        .take_reply = ring_entry_take_reply,
        .amend_init_reply = amend_init_reply,
        .init_reply_accepted = init_reply_accepted,
    });
    return rings;
}

void vaultaire_ring_finish(struct vaultaire_rings *rings) {
    if (!rings) return;
    release_workers(rings, -1);
    for (unsigned i = 0; i < rings->worker_count; i++) {
        struct ring_worker *w = &rings->workers[i];
        uint64_t one = 1;
        if (w->stop_fd >= 0) (void)!write(w->stop_fd, &one, sizeof one);
    }
    join_workers(rings);
    // No request is served any more: the device loop has ended and so have the workers.
    vaultaire_wire_use_transport(NULL);
    free_rings(rings);
}
