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

#include <stdbool.h>
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

/*
 * The digest of RAM with the pages of @as_zero (one bitmap per block) taken
 * as zeros whatever they hold: a migration source passes its free pages
 * (hinted free by the guest), which the destination holds as zeros.
 */
int gw_ram_digest_except(const struct gw_vm_info *vm, unsigned nr_threads,
			 const struct gw_bitmap *as_zero, struct gw_digest *out);

/* ---- digests of memory that changes meanwhile (see mem/snapshot.c) ---- */

#define GW_DIGEST_CHUNK_BYTES (256u << 10)

/* One chunk's contribution: nothing when all zero, else its XXH3-128. */
struct gw_chunk_hash {
	bool nonzero;
	uint64_t lo, hi;
};

/*
 * Called around each chunk by the digest workers. chunk_begin: true (and
 * *res) when the chunk was hashed already (it is then not read); false
 * means "hash it now: it does not change until chunk_end". chunk_end gets
 * the result (NULL on a read error); the chunk may change after it.
 */
struct gw_digest_hooks {
	void *ctx;
	bool (*chunk_begin)(void *ctx, unsigned block, uint64_t chunk, struct gw_chunk_hash *res);
	void (*chunk_end)(void *ctx, unsigned block, uint64_t chunk, const struct gw_chunk_hash *res);
};

/* gw_ram_digest_masked with hooks (NULL: none). Same result for the same bytes. */
int gw_ram_digest_hooked(const struct gw_vm_info *vm, unsigned nr_threads,
			 const struct gw_bitmap *may_hold_data, const struct gw_digest_hooks *hooks,
			 struct gw_digest *out);
/*
 * Hash chunk @chunk of block @block now (@buf: GW_DIGEST_CHUNK_BYTES), with
 * the pages of @may_hold_data as the only ones that may hold data. 0 or -errno.
 */
int gw_digest_chunk(const struct gw_vm_info *vm, const struct gw_bitmap *may_hold_data,
		    unsigned block, uint64_t chunk, uint8_t *buf, struct gw_chunk_hash *res);

#endif
