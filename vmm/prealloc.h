/* SPDX-License-Identifier: MIT */
/*
 * --prealloc for every backend: allocate and map every page of a RAM block
 * now, like QEMU's -mem-prealloc. A destination created ahead of the migrate
 * command then receives into memory that is already backed and mapped (the
 * engine writes straight into the mapping), and a source whose RAM was
 * filled by another process (--memory-file) has it mapped, as a guest that
 * ran has: on virtualised hosts the first touch of a page costs far more
 * than the copy into it, and a page not mapped here is read with pread.
 */
#ifndef VMM_PREALLOC_H
#define VMM_PREALLOC_H

#include <stdint.h>

/*
 * MADV_POPULATE_WRITE over @size_bytes at @host (a MAP_SHARED mapping of
 * the block), in two halves on two threads: the calling one and a helper
 * it joins. Contents are kept (a file's pages are mapped, not written).
 * 0 or -errno.
 */
int vmm_prealloc_ram(uint8_t *host, uint64_t size_bytes);

#endif
