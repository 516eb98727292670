#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caller_placement.h"

static atomic_int usable;
static int loadavg_fd = -1;

static void *try_round_trip(void *result) {
    struct sched_param none = {0};
    // A thread that cannot come back stays SCHED_IDLE; this one ends here either way.
    *(int *)result = sched_setscheduler(0, SCHED_IDLE, &none) == 0 && sched_setscheduler(0, SCHED_OTHER, &none) == 0;
    return NULL;
}

int vaultaire_placement_prepare(void) {
    if (atomic_load(&usable)) return 1;
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int works = 0;
    pthread_t probe;
    if (pthread_create(&probe, NULL, try_round_trip, &works) != 0 || pthread_join(probe, NULL) != 0) works = 0;
    if (!works) {
        close(fd);
        return 0;
    }
    loadavg_fd = fd;
    atomic_store(&usable, 1);
    return 1;
}

// The fourth field of /proc/loadavg is "running/total": the tasks runnable right now, this one included.
static int runnable_tasks(void) {
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

int vaultaire_placement_wanted(void) {
    // Acquire: loadavg_fd was set before usable was.
    if (!atomic_load_explicit(&usable, memory_order_acquire)) return 0;
    int runnable = runnable_tasks();
    return runnable >= 0 && runnable <= 1;
}

void vaultaire_placement_drop(void) {
    struct sched_param none = {0};
    (void)sched_setscheduler(0, SCHED_IDLE, &none);
}

void vaultaire_placement_restore(void) {
    struct sched_param none = {0};
    // The probe showed this works; if the limits changed since, stop dropping (this thread stays idle).
    if (sched_setscheduler(0, SCHED_OTHER, &none) != 0) atomic_store(&usable, 0);
}
