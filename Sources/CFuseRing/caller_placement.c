#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "caller_placement.h"

static void *try_round_trip(void *result) {
    struct sched_param none = {0};
    // A thread that cannot come back stays SCHED_IDLE; this one ends here either way.
    *(int *)result = sched_setscheduler(0, SCHED_IDLE, &none) == 0 && sched_setscheduler(0, SCHED_OTHER, &none) == 0;
    return NULL;
}

int vaultaire_placement_prepare(struct vaultaire_placement *placement) {
    atomic_store(&placement->usable, 0);
    placement->loadavg_fd = -1;
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int works = 0;
    pthread_t probe;
    if (pthread_create(&probe, NULL, try_round_trip, &works) != 0 || pthread_join(probe, NULL) != 0) works = 0;
    if (!works) {
        close(fd);
        return 0;
    }
    placement->loadavg_fd = fd;
    atomic_store(&placement->usable, 1);
    return 1;
}

void vaultaire_placement_close(struct vaultaire_placement *placement) {
    atomic_store(&placement->usable, 0);
    if (placement->loadavg_fd >= 0) close(placement->loadavg_fd);
    placement->loadavg_fd = -1;
}

// The fourth field of /proc/loadavg is "running/total": the tasks runnable right now, this one included.
static int runnable_tasks(int loadavg_fd) {
    char text[128];
    ssize_t n = pread(loadavg_fd, text, sizeof text - 1, 0);
    if (n <= 0) return -1;
    text[n] = 0;
    char *slash = strchr(text, '/');
    if (!slash) return -1;
    char *start = slash;
    while (start > text && start[-1] != ' ') start--;
    return atoi(start);
}

static int64_t coarse_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

int vaultaire_placement_wanted(struct vaultaire_placement *placement, struct vaultaire_placement_sample *sample) {
    if (!atomic_load(&placement->usable)) return 0;
    int64_t now = coarse_now_ns();
    if (sample->checked_ns == 0 || now - sample->checked_ns >= VAULTAIRE_PLACEMENT_RECHECK_NS) {
        int runnable = runnable_tasks(placement->loadavg_fd);
        sample->quiet = runnable >= 0 && runnable <= 1;
        sample->checked_ns = now;
    }
    return sample->quiet;
}

void vaultaire_placement_drop(void) {
    struct sched_param none = {0};
    (void)sched_setscheduler(0, SCHED_IDLE, &none);
}

void vaultaire_placement_restore(struct vaultaire_placement *placement) {
    struct sched_param none = {0};
    // The probe showed this works; if the limits changed since, stop dropping (this thread stays idle).
    if (sched_setscheduler(0, SCHED_OTHER, &none) != 0) atomic_store(&placement->usable, 0);
}
