#ifndef VAULTAIRE_RING_KERNEL_H
#define VAULTAIRE_RING_KERNEL_H

// What the kernel offers the rings (with vaultaire_ring_kernel_allows, in fuse_ring.h).

// The kernel makes one queue per possible CPU and sends each request to the queue of the CPU its
// caller runs on; every queue must have an entry before any request goes through a ring. The number
// of possible CPUs, or 0 if their numbering has gaps (not handled: no rings).
unsigned ring_possible_cpus(void);

#endif
