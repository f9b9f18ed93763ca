/* SPDX-License-Identifier: MIT */
/*
 * Which pages of a RAM block were ever populated: never-populated memory
 * reads as zero and is neither read nor sent. memfd/file-backed blocks:
 * SEEK_DATA/SEEK_HOLE on the fd. Anonymous blocks: PAGEMAP_SCAN with
 * PAGE_IS_PRESENT|PAGE_IS_SWAPPED (fallback: /proc/self/pagemap reads).
 * When nothing can tell, every page counts as populated.
 */
#ifndef GW_POPULATED_H
#define GW_POPULATED_H

#include <sys/types.h>
#include <godwit/vm.h>
#include "mem/bitmap.h"

/*
 * Set in @out (block pages bits, already allocated) the pages of @b that may
 * hold data. Returns the number of such pages, or -errno. *@method (may be
 * NULL) gets "seek-data", "pagemap-scan", "pagemap" or "all".
 */
ssize_t gw_populated_scan(const struct gw_ram_block *b, struct gw_bitmap *out,
			  const char **method);

/*
 * Call @fn for each run of pages of fd-backed block @b that is allocated in
 * its file (SEEK_DATA / SEEK_HOLE), in order; an anonymous block is one run.
 * Cheap for sparse files: it costs per run, not per page. A page outside
 * every run holds no data and was never written. Stops at the first
 * non-zero return of @fn and returns it; 0, or -errno from lseek.
 */
typedef int (*gw_range_fn)(void *ctx, uint64_t first_page, uint64_t nr_pages);
int gw_populated_ranges(const struct gw_ram_block *b, gw_range_fn fn, void *ctx);
/* The same over pages [@first_page, @end_page) of the block only (runs clipped to it). */
int gw_populated_ranges_in(const struct gw_ram_block *b, uint64_t first_page, uint64_t end_page,
			   gw_range_fn fn, void *ctx);

#endif
