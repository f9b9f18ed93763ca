/* SPDX-License-Identifier: MIT */
/*
 * verify: pass after pass, rewrite every page of this vCPU's slice with
 * vmm_verify_page(page, gen) (common/content.h, the function the host checks
 * against), keeping the invariant of guest_abi.h: `written` moves by one
 * 64-bit store after the page is whole. With GW_BOOT_RECHECK, after each
 * incoming migration the guest re-checks
 * its slice itself and reports through GW_PV_VERIFY_RESULT (it asks
 * GW_PV_MIGRATIONS once per batch: the VMM never writes guest RAM); pages still at
 * generation 0 (the host's --fill content) are left to the host's check.
 */
#include "guest.h"
#include "content.h"

#define WORDS (GW_GUEST_PAGE_BYTES / 8)

/* Every word of @p holds its value for @gen, or for @old when @old != 0. */
static int page_ok(const uint64_t *p, uint64_t page, uint64_t gen, uint64_t old)
{
	uint64_t x = vmm_verify_seed(page, gen), y = old ? vmm_verify_seed(page, old) : 0;

	for (unsigned k = 0; k < WORDS; k++) {
		uint64_t w = p[k];
		uint64_t want = k == 0 ? page : k == 1 ? gen : vmm_verify_word(x, k);
		uint64_t alt = k == 0 ? page : k == 1 ? old : vmm_verify_word(y, k);

		if (w != want && (!old || w != alt))
			return 0;
	}
	return 1;
}

static void recheck(struct gw_vcpu_area *a, const uint8_t *base, uint64_t t)
{
	uint64_t n = a->nr_pages, cursor = t % n, gen = t / n + 1;
	uint64_t bad = 0, checked = 0;
	int ok = 1;

	for (uint64_t off = 0; off < n && ok; off++) {
		const uint64_t *p = (const uint64_t *)(base + off * GW_GUEST_PAGE_BYTES);
		uint64_t page = a->first_page + off;

		if (off < cursor)
			ok = page_ok(p, page, gen, 0);
		else if (off == cursor)		/* may be half written */
			ok = gen == 1 || page_ok(p, page, gen, gen - 1);
		else if (gen > 1)
			ok = page_ok(p, page, gen - 1, 0);
		else
			continue;		/* generation 0: the host's fill */
		checked++;
		if (!ok)
			bad = page;
	}
	a->args[0] = !ok;
	a->args[1] = bad;
	a->args[2] = checked;
	pv_call(GW_PV_VERIFY_RESULT);
	if (!ok) {
		publish_u64(&a->state, GW_VCPU_FAILED);
		guest_halt_forever();
	}
}

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	struct gw_vcpu_area *a = vcpu_area(idx);
	uint8_t *base = (uint8_t *)(uintptr_t)bi->ram_gpa + a->first_page * GW_GUEST_PAGE_BYTES;
	uint64_t n = a->nr_pages, batch = bi->pace_batch_pages ? bi->pace_batch_pages : 64;
	uint64_t t = read_u64(&a->written);
	int paced = bi->flags & GW_BOOT_PACED, rechecks = bi->flags & GW_BOOT_RECHECK;

	guest_init(idx, "verify");
	if (!n)
		guest_halt_forever();
	for (;;) {
		if (rechecks) {
			uint64_t migrations = pv_call(GW_PV_MIGRATIONS);

			if (migrations != a->seen_migrations) {
				recheck(a, base, t);
				publish_u64(&a->seen_migrations, migrations);
			}
		}
		for (uint64_t i = 0; i < batch; i++) {
			uint64_t off = t % n;

			vmm_verify_page(a->first_page + off, t / n + 1,
					(uint64_t *)(base + off * GW_GUEST_PAGE_BYTES));
			publish_u64(&a->written, ++t);
		}
		if (paced) {
			a->args[0] = batch;
			pv_call(GW_PV_PACE);
		}
	}
}
