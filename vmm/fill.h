/* SPDX-License-Identifier: MIT */
/*
 * Initial RAM content (--fill), a pure function of (fill, seed, global page
 * index), prepared on the host for every backend: reproducible, independent
 * of thread count, and checkable page by page. Global page index: block 0's
 * pages first, then block 1's, ... Names and the enum are in vmm.h.
 */
#ifndef GW_VMM_FILL_H
#define GW_VMM_FILL_H

#include <stdbool.h>
#include <stdint.h>
#include <godwit/vm.h>
#include "vmm.h"

/* Content of global page @page for @fill and @seed (VMM_PAGE_BYTES). NONE = zeros. */
void vmm_fill_page(enum vmm_fill fill, uint64_t seed, uint64_t page, uint8_t *out);
/*
 * Fill all of @info's RAM with @nr_threads threads. @fresh: RAM is known to
 * be zero already (new memfd), so zero pages are only populated, not written.
 * 0 or -errno.
 */
int vmm_fill_ram(const struct gw_vm_info *info, enum vmm_fill fill, uint64_t seed,
		 bool fresh, unsigned nr_threads);

#endif
