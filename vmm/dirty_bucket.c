/* SPDX-License-Identifier: MIT */
/* The dirty-limit token bucket (dirty_bucket.h). Threads: the vCPU's own. */
#include "dirty_bucket.h"

#define DIRTY_BURST_NS 10000000ull	/* a bucket holds this much of the rate */

bool vmm_dirty_bucket_take(struct vmm_dirty_bucket *b, uint64_t bps, uint64_t now_ns,
			   uint64_t need_bytes, uint64_t page_bytes, uint64_t *wait_ns)
{
	uint64_t cap;

	if (!bps) {
		b->tokens_bytes = 0;
		b->tokens_ns = 0;
		return false;
	}
	cap = bps * DIRTY_BURST_NS / 1000000000ull;
	if (cap < page_bytes)
		cap = page_bytes;
	if (!b->tokens_ns)
		b->tokens_bytes = (int64_t)cap;	/* limit just switched on: a full bucket */
	else
		b->tokens_bytes += (int64_t)((now_ns - b->tokens_ns) * bps / 1000000000ull);
	if (b->tokens_bytes > (int64_t)cap)
		b->tokens_bytes = (int64_t)cap;
	b->tokens_ns = now_ns;
	b->tokens_bytes -= (int64_t)need_bytes;
	if (b->tokens_bytes >= 0)
		return false;
	*wait_ns = (uint64_t)(-b->tokens_bytes) * 1000000000ull / bps;
	return true;
}
