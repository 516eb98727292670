#ifndef VAULTAIRE_FUSE_WIRE_H
#define VAULTAIRE_FUSE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

// Read and write the FUSE device on libfuse's behalf (installed with fuse_session_custom_io).
// libfuse 3.14 cannot negotiate FUSE_HANDLE_KILLPRIV_V2, which spares the kernel a getxattr
// round trip before writes; these add it to the INIT reply when the kernel offers it, and note
// which requests ask the filesystem to clear set-user-ID and set-group-ID bits.
ssize_t vaultaire_wire_read(int fd, void *buf, size_t len, void *userdata);
ssize_t vaultaire_wire_writev(int fd, struct iovec *iov, int count, void *userdata);

// Notes what the device hooks need from a request (INIT's offers, set-ID flags); the device reader
// calls it for every request it reads, the io_uring queues for every request they serve.
void vaultaire_wire_note_request(const void *request, size_t length);

// 1 if the request being served on this thread (write, truncating setattr or open, chown) asks
// the filesystem to clear set-ID bits. libfuse serves a request on the thread that read it.
int vaultaire_wire_request_kills_setid(void);

// The inode number (FUSE node ID) the request being served on this thread is about: for naming the
// file in the log when the request fails.
uint64_t vaultaire_wire_request_node(void);

// The mount's own read-ahead window, set once the kernel has taken the INIT reply (the reply's
// max_readahead can only shrink the window, and the kernel applies it then): `path` names the
// mount's /sys/class/bdi/<device>/read_ahead_kb. Without the right to write there (an unprivileged
// mount) the kernel's window stays. Call before the device loop starts.
void vaultaire_wire_set_read_ahead_after_init(const char *path, unsigned kib);

#endif
