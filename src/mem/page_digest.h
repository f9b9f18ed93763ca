/* SPDX-License-Identifier: MIT */
/*
 * The RAM digest of a postcopy migration. After the switch the pages a
 * destination holds arrive in any order, each at most once, and the guest
 * may write a page as soon as it is placed: the canonical chunk digest
 * (mem/digest.h), which hashes 256 KiB at a time in order, cannot be taken
 * there. This digest is a sum instead, so pages can be added in any order,
 * one at a time, by any thread holding its own accumulator:
 *
 *   page hash = XXH3-128(the page's 4096 bytes, seed = block << 40 | page)
 *   digest    = sum of the hashes of every non-zero page, mod 2^128
 *               (lo: low 64 bits, hi: high 64 bits, carry from lo to hi)
 *
 * A zero page (or a hole) adds nothing, so a digest does not depend on
 * which pages are allocated. The seed binds each page to its place: a page
 * written at the wrong index, lost, stale or twice changes the sum.
 */
#ifndef GW_MEM_PAGE_DIGEST_H
#define GW_MEM_PAGE_DIGEST_H

#include <stdint.h>
#include <godwit/vm.h>
#include "mem/bitmap.h"

struct gw_page_digest {
	uint64_t lo, hi;
};

/* Add page @page of block @block holding @data (GW_PAGE_BYTES); zero pages add nothing. */
void gw_page_digest_add(struct gw_page_digest *d, unsigned block, uint64_t page, const void *data);
/* d += o. */
void gw_page_digest_merge(struct gw_page_digest *d, const struct gw_page_digest *o);
/*
 * The digest of all of @vm's RAM, which must not change meanwhile (a source
 * after the pause), counting the pages of @as_zero (one bitmap per block,
 * NULL: none) as zeros. Holes are not read. @nr_threads >= 1 (the caller
 * and helpers). 0 or -errno.
 */
int gw_page_digest_ram(const struct gw_vm_info *vm, unsigned nr_threads,
		       const struct gw_bitmap *as_zero, struct gw_page_digest *out);

#endif
