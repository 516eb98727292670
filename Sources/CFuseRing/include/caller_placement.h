#ifndef VAULTAIRE_CALLER_PLACEMENT_H
#define VAULTAIRE_CALLER_PLACEMENT_H

#include <stdatomic.h>
#include <stdint.h>

// Keeping a reader on the CPU that answered it (the io_uring queues' workers).
//
// When a ring worker commits a reply, the kernel wakes the caller without telling the scheduler that
// the worker is about to sleep, so the scheduler sees the worker's CPU busy and wakes the caller on
// another, idle CPU. Its next request then goes to that CPU's queue: a program reading one block at a
// time hops between CPUs on every request (measured: ~5,000 migrations a second), and each hop wakes
// an idle CPU. Committing as SCHED_IDLE makes the scheduler count this CPU as idle for that decision,
// so the caller is woken here and runs at once; the worker is back to its ordinary policy as soon as
// the reply is handed over. (Through /dev/fuse, where any of the loop's threads may take the next
// request, the same measured no clear gain, so it is not used there.)

// Replies to reads smaller than this are steered: random reads of a few KiB are answered one at a
// time, each with its reader waiting. Larger reads are the kernel's read-ahead streams, where reader
// and server are better on two CPUs; other requests were measured no faster (`tar x` a fifth slower).
#define VAULTAIRE_STEERED_READ_LIMIT (32 * 1024)

// How long a look at /proc/loadavg stays good for one worker. Reading it costs ~1.8 µs, once per
// small read at tens of thousands of reads a second; looked at no more than every 10 ms, a worker
// still notices other work within a fraction of the stalls the check prevents (20–100 ms, below).
#define VAULTAIRE_PLACEMENT_RECHECK_NS (10 * 1000 * 1000)

// Shared by a mount's workers.
struct vaultaire_placement {
    atomic_int usable;     // prepared, and no thread has failed to come back from SCHED_IDLE
    int loadavg_fd;
};

// One worker's last look at /proc/loadavg.
struct vaultaire_placement_sample {
    int64_t checked_ns;    // CLOCK_MONOTONIC_COARSE; 0: never
    int quiet;             // nothing but the worker itself was runnable
};

// Prepares; 1 if this process may drop a thread to SCHED_IDLE and bring it back (CAP_SYS_NICE or a
// RLIMIT_NICE that allows nice 0), found by trying on a short-lived thread. 0: never used.
int vaultaire_placement_prepare(struct vaultaire_placement *placement);
void vaultaire_placement_close(struct vaultaire_placement *placement);

// 1 if a reply may be handed over from SCHED_IDLE now: prepared, and nothing but the calling thread is
// runnable on the machine (/proc/loadavg, re-read once `sample` is older than the recheck interval),
// so that no other task can take the CPU between the drop and the reply and hold the reply back at
// idle weight (measured with a busy loop on each CPU: without this check, stalls of up to 100 ms).
int vaultaire_placement_wanted(struct vaultaire_placement *placement, struct vaultaire_placement_sample *sample);

// Around the system call that hands the reply over. The second restores SCHED_OTHER; should that ever
// fail (limits lowered since the probe), the thread stays idle and no thread drops again.
void vaultaire_placement_drop(void);
void vaultaire_placement_restore(struct vaultaire_placement *placement);

#endif
