/* SPDX-License-Identifier: MIT */
/*
 * dirty: rewrite this vCPU's slice of the working set over and over, whole
 * pages (8-byte stores) or one 8-byte word per page. `written` counts pages;
 * with a rate the VMM paces the guest: every pace_batch_pages pages the
 * guest asks GW_PV_PACE, which returns when the rate allows more.
 */
#include "guest.h"

/* Plain 8-byte stores, unrolled: no string or SSE instruction (guest.h). */
static void page_fill(uint64_t *p, uint64_t v)
{
	volatile uint64_t *q = p;

	for (unsigned k = 0; k < GW_GUEST_PAGE_BYTES / 8; k += 8) {
		q[k] = v;
		q[k + 1] = v;
		q[k + 2] = v;
		q[k + 3] = v;
		q[k + 4] = v;
		q[k + 5] = v;
		q[k + 6] = v;
		q[k + 7] = v;
	}
}

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	struct gw_vcpu_area *a = vcpu_area(idx);
	uint8_t *base = (uint8_t *)(uintptr_t)bi->ram_gpa + a->first_page * GW_GUEST_PAGE_BYTES;
	uint64_t n = a->nr_pages, batch = bi->pace_batch_pages ? bi->pace_batch_pages : 64;
	uint64_t t = read_u64(&a->written), off = n ? t % n : 0, gen = n ? t / n + 1 : 1;
	int whole = bi->flags & GW_BOOT_PATTERN_PAGE, paced = bi->flags & GW_BOOT_PACED;

	guest_init(idx, "dirty");
	if (!n)
		guest_halt_forever();
	for (;;) {
		for (uint64_t i = 0; i < batch; i++) {
			uint64_t *p = (uint64_t *)(base + off * GW_GUEST_PAGE_BYTES);
			uint64_t v = gen << 20 ^ off;

			if (whole)
				page_fill(p, v);
			else
				p[(gen * 8 + 1) % (GW_GUEST_PAGE_BYTES / 8)] = v;
			publish_u64(&a->written, ++t);
			if (++off == n) {
				off = 0;
				gen++;
			}
		}
		if (paced) {
			a->args[0] = batch;
			pv_call(GW_PV_PACE);
		}
	}
}
