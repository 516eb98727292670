#ifndef VAULTAIRE_FUSE_RING_ABI_H
#define VAULTAIRE_FUSE_RING_ABI_H

#include <stdint.h>

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

#endif
