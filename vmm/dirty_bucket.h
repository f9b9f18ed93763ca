/* SPDX-License-Identifier: MIT */
/*
 * The dirty-limit token bucket of one vCPU, for both backends: the bucket
 * holds DIRTY_BURST_NS worth of the rate (at least one page); a vCPU that
 * dirtied more than it holds sleeps until the debt is paid.
 *
 * Threads: a bucket belongs to its vCPU thread; the rate is read by the
 * caller (an atomic of the VM).
 */
#ifndef GW_VMM_DIRTY_BUCKET_H
#define GW_VMM_DIRTY_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

struct vmm_dirty_bucket {
	int64_t tokens_bytes;		/* bytes the vCPU may still dirty */
	uint64_t tokens_ns;		/* last refill, 0 = bucket not running */
};

/*
 * @need_bytes dirtied at @now_ns under the limit @bps (0: no limit, the
 * bucket stops). True when the vCPU must sleep *@wait_ns first, then call
 * vmm_dirty_bucket_slept().
 */
bool vmm_dirty_bucket_take(struct vmm_dirty_bucket *b, uint64_t bps, uint64_t now_ns,
			   uint64_t need_bytes, uint64_t page_bytes, uint64_t *wait_ns);

/* After the sleep: the debt paid, the bucket empty as of @now_ns. */
static inline void vmm_dirty_bucket_slept(struct vmm_dirty_bucket *b, uint64_t now_ns)
{
	b->tokens_bytes = 0;
	b->tokens_ns = now_ns;
}

#endif
