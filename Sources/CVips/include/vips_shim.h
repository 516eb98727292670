#ifndef VAULTAIRE_VIPS_SHIM_H
#define VAULTAIRE_VIPS_SHIM_H

#include <stddef.h>

// libvips (Debian's libvips-dev) behind non-variadic calls: thumbnails from a plaintext buffer in
// memory to a PNG in memory. Nothing here opens a file.

/// Starts libvips once per process: operation cache off (no decoded plaintext kept between calls),
/// untrusted loaders (ImageMagick, PDF, SVG, FITS …) blocked, one worker thread per operation, and the
/// disc threshold raised so that no loader decodes to a temporary file. 0 on success.
int vaultaire_vips_start(void);

/// The loader libvips picks for `data` (e.g. "VipsForeignLoadJpegBuffer"), and the image's width,
/// height and page count from its header (nothing is decoded). 0 on success, -1 if no loader takes it.
int vaultaire_vips_probe(const void *data, size_t length, char *loader, size_t loader_capacity, int *width,
                         int *height, int *pages);

/// A PNG of the image's first page whose longest side is `size` pixels (never enlarged), decoded with
/// shrink-on-load and sequential access; corrupt input fails, warnings included (fail-on=warning):
/// libjpeg decodes damaged entropy data with mere warnings, and a thumbnail of that noise is worse than none. On success 0 and a
/// buffer to release with vaultaire_vips_free.
int vaultaire_vips_thumbnail_png(const void *data, size_t length, int size, void **png, size_t *png_length);

/// Releases a buffer libvips allocated.
void vaultaire_vips_free(void *buffer);

/// Copies libvips' error text for this thread into `message` (truncated) and clears it.
void vaultaire_vips_take_error(char *message, size_t capacity);

/// Frees libvips' per-thread state; called by a thread that used libvips before it ends.
void vaultaire_vips_thread_done(void);

#endif
