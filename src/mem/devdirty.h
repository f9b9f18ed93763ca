/* SPDX-License-Identifier: MIT */
/*
 * Device-dirty pages: guest pages a VMM's devices wrote behind the dirty
 * tracker's back (an I/O thread filling receive buffers and used rings:
 * KVM's dirty log sees only vCPU writes, uffd-wp only writes through the
 * mapping it registered), reported with gw_session_mark_dirty and folded
 * into the pages to send at every harvest (source/precopy.c).
 *
 * Two levels per RAM block, both written with atomic ORs and taken with
 * atomic exchanges, so that a mark is lock-free and a harvest never
 * walks more than a 64th of a bit per page:
 *   pages: one bit per page;
 *   words: one bit per 64-bit word of pages that may be non-zero.
 * A mark sets the page bits, then the word bit (only when not set: a
 * plain load). A take exchanges a word of `words` for 0, then each pages
 * word it names. Every one of these accesses is sequentially consistent:
 *   - a mark whose word bit was seen set is taken by the harvest that
 *     clears that bit, or a later one: that harvest's exchanges come after
 *     the mark's OR in the single order;
 *   - a page bit is taken by an exchange that reads the OR that set it,
 *     which the device made after writing the page: the device's bytes
 *     happen before the harvest's exchange, so before the page is read
 *     for sending. A write marked after the exchange keeps its bit for
 *     the next harvest. So a marked write is never lost: it is sent by
 *     the harvest that takes its bit, or a later one.
 *
 * Threads: init and free belong to the session's owner (gw_session_new,
 * gw_session_free); mark from any thread, any time in between; reset and
 * take on the source's migration thread. The block table is read-only
 * after init.
 */
#ifndef GW_MEM_DEVDIRTY_H
#define GW_MEM_DEVDIRTY_H

#include <stdbool.h>
#include <stdint.h>
#include <godwit/vm.h>
#include "mem/bitmap.h"

struct gw_devdirty_block {
	uint64_t gpa;			/* set at init: the block's guest-physical base */
	uint64_t size_bytes;		/* set at init */
	uint64_t nr_pages;		/* set at init: size_bytes / GW_PAGE_BYTES */
	uint64_t *pages;		/* atomic: bit p = page p written by a device */
	uint64_t *words;		/* atomic: bit w = pages[w] may be non-zero */
};

struct gw_devdirty {
	unsigned nr_blocks;		/* set at init; 0 = none (a destination) */
	int seen;			/* atomic: a mark was made (ever: never cleared) */
	struct gw_devdirty_block b[GW_MAX_RAM_BLOCKS];	/* set at init, words atomic */
};

/* One pair of bitmaps per block of @vm (zeroed). 0 or -ENOMEM (nothing kept). */
int gw_devdirty_init(struct gw_devdirty *d, const struct gw_vm_info *vm);
/* Safe on a zeroed or failed struct. */
void gw_devdirty_free(struct gw_devdirty *d);
/*
 * The pages of [@gpa, @gpa + @len_bytes) were written: it must lie inside
 * one block. 0 (also for @len_bytes 0 inside a block), -EINVAL outside
 * every block, across a block's end, or with no blocks. Lock-free: an
 * atomic OR per 64 pages of the range, one more per 256 KiB when that
 * summary bit is clear.
 */
int gw_devdirty_mark(struct gw_devdirty *d, uint64_t gpa, uint64_t len_bytes);
/*
 * Whether a device ever reported a write here. Pages are then never sent
 * straight from guest memory (send-path live, zerocopy): a device's write
 * during such a send changes the page after its CRC, and its report comes
 * after the write, possibly after the channel asked which pages changed
 * (PAGES_VOID), so the destination would see a CRC no message excuses.
 */
static inline bool gw_devdirty_seen(const struct gw_devdirty *d)
{
	return __atomic_load_n(&d->seen, __ATOMIC_RELAXED) != 0;
}

/*
 * Forget every mark (a migration starts: its round 0 reads every page
 * after this). A mark racing with it may survive: a page sent once more.
 */
void gw_devdirty_reset(struct gw_devdirty *d);
/*
 * Take every mark: OR the marked pages of block i into out[i] (one
 * bitmap per block, of nr_pages bits) and clear them. Returns how many
 * marks were taken (pages out[] may hold already).
 */
uint64_t gw_devdirty_take(struct gw_devdirty *d, struct gw_bitmap *out);

#endif
