#include <stdio.h>
#include <stdlib.h>
#include "fuse_ring.h"
#include "ring_kernel.h"

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

unsigned ring_possible_cpus(void) {
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
