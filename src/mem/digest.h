/* SPDX-License-Identifier: MIT */
/*
 * Whole-RAM digest for verification (XXH3-128), canonical: it depends only
 * on the bytes of RAM, never on which pages happen to be populated, and not
 * on the number of threads. Never-populated pages are not read (they count
 * as zero), so an idle 8 GiB guest costs milliseconds.
 *
 * Canonical form: each block is cut in chunks of 256 KiB; a chunk whose
 * bytes are all zero contributes nothing; any other chunk contributes
 * (block index, chunk index, XXH3-128 of its bytes, holes fed as zeros).
 * Chunks are grouped in 64 MiB groups hashed independently (so threads can
 * share the work), and the result is XXH3-128 over the (group index, group
 * digest) pairs of non-empty groups, with each block's name and size.
 */
#ifndef GW_DIGEST_H
#define GW_DIGEST_H

#include <stdint.h>
#include <godwit/vm.h>
#include "mem/bitmap.h"

struct gw_digest {
	uint64_t lo, hi;
};

/* 0 or -errno (-ENOMEM). @nr_threads >= 1. RAM must not change meanwhile. */
int gw_ram_digest(const struct gw_vm_info *vm, unsigned nr_threads, struct gw_digest *out);
/*
 * The same digest, when the caller knows which pages may hold data (one
 * bitmap per block, one bit per page): pages outside are taken as zero
 * without being read. A migration destination passes the pages it wrote:
 * its RAM started zero (gw_session_new), so the rest is zero, even where
 * it was preallocated (populated) and a scan would have to read it.
 */
int gw_ram_digest_masked(const struct gw_vm_info *vm, unsigned nr_threads,
			 const struct gw_bitmap *may_hold_data, struct gw_digest *out);

#endif
