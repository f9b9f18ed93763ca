/* SPDX-License-Identifier: MIT */
/*
 * Invariant (kvm-log and kvm-ring, as the engine drives them): every page
 * the guest writes after the tracker re-armed it is reported by the next
 * collect; none is lost between harvests; block "ram" reports no page
 * outside the working set; block "sys" reports the vCPU areas the guests
 * keep writing. The dirty guest writes its slice in order and publishes
 * `written` = t after page t, so the pages written between two instants
 * are known exactly: with Y read after the previous re-arm and X read
 * before this collect, pages t in [Y + 1, X) were written after the re-arm
 * (page Y may have been written just before it) and before the collect, so
 * this collect must report them. Pages written while a collect and its
 * re-arm ran, t in [X, Y] (those written by the next check), must be in
 * that collect's report (the engine reads them after the re-arm) or in the
 * next one: together the two windows cover every write since start.
 *
 * kvm-log: after each collect the test clears every chunk of 100 pages (not
 * a multiple of 64: KVM_CLEAR_DIRTY_LOG wants 64-page alignment, the
 * backend widens and masks) as the engine does before sending.
 * kvm-ring: a large ring, and a 256-entry ring that fills: its vCPUs must
 * exit with KVM_EXIT_DIRTY_RING_FULL and keep running after the reaper
 * resets the rings (the invariant holds throughout; an overflow, where the
 * host's KVM lets one happen, turns into a full resend, a superset).
 */
#include <stdio.h>
#include <stdlib.h>
#include <godwit/godwit.h>
#include "kvm_test.h"
#include "mem/dirty.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define ROUNDS 30
#define MIN_WRITES 1000
#define CLEAR_CHUNK_PAGES 100u
#define NR_VCPUS 2

struct config {
	const char *name;
	enum gw_dirty_backend_id id;
	enum kvm_dirty_mode mode;
	uint32_t ring_entries;
	const char *workload;
	bool expect_full;		/* the ring must fill (RING_FULL exits) */
};

static const struct config configs[] = {
	{ "kvm-log byte", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, "dirty:ws=64M,pattern=byte", false },
	{ "kvm-log page", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, "dirty:ws=2M,pattern=page", false },
	{ "kvm-ring byte", GW_DIRTY_KVM_RING, KVM_DIRTY_MODE_RING, 16384, "dirty:ws=64M,pattern=byte", false },
	{ "kvm-ring small", GW_DIRTY_KVM_RING, KVM_DIRTY_MODE_RING, 256, "dirty:ws=64M,pattern=byte", true },
};

static void read_counters(struct vmm *vm, uint64_t *t)
{
	for (unsigned i = 0; i < NR_VCPUS; i++)
		t[i] = __atomic_load_n(&kvm_test_area(vm, i)->written, __ATOMIC_ACQUIRE);
}

/* Every page of vCPU @i written for t in [from, to) is in @got; counts misses. */
static uint64_t missing(struct vmm *vm, unsigned i, uint64_t from, uint64_t to,
			const struct gw_bitmap *got)
{
	const struct gw_vcpu_area *a = kvm_test_area(vm, i);
	uint64_t n = a->nr_pages, miss = 0;

	if (to <= from)
		return 0;
	if (to - from > n)
		from = to - n;
	for (uint64_t t = from; t < to; t++)
		if (!gw_bitmap_test(got, a->first_page + t % n))
			miss++;
	return miss;
}

static void rearm(const struct gw_dirty *d, const struct gw_vm_info *info)
{
	if (!d->ops->clear)
		return;
	for (unsigned b = 0; b < info->nr_blocks; b++) {
		uint64_t pages = info->blocks[b].size_bytes / GW_PAGE_BYTES;

		for (uint64_t p = 0; p < pages; p += CLEAR_CHUNK_PAGES) {
			uint64_t n = pages - p < CLEAR_CHUNK_PAGES ? pages - p : CLEAR_CHUNK_PAGES;

			TEST_ASSERT(d->ops->clear((struct gw_dirty *)d, b, p, n) == 0, "clear");
		}
	}
}

/* The relaxed window of the previous round: in its report or in this one. */
static uint64_t missing_either(struct vmm *vm, unsigned i, uint64_t from, uint64_t to,
			       const struct gw_bitmap *a, const struct gw_bitmap *b)
{
	struct gw_bitmap both;
	uint64_t miss;

	TEST_ASSERT(gw_bitmap_init(&both, a->nr_bits) == 0, "bitmap");
	gw_bitmap_or(&both, a);
	gw_bitmap_or(&both, b);
	miss = missing(vm, i, from, to, &both);
	gw_bitmap_free(&both);
	return miss;
}

static bool full_seen(struct vmm *vm)
{
	struct kvm_guest_report rep;

	vmm_kvm_guest_report(vm, &rep);
	return rep.dirty_ring_full_exits > 0;
}

static void run(const struct config *c)
{
	struct kvm_vm_opts opts = { .dirty = c->mode, .ring_entries = c->ring_entries,
				    .guest_recheck = 0 };
	struct vmm *vm = kvm_test_vm(128 << 20, NR_VCPUS, c->workload, VMM_FILL_ZERO, &opts);
	const struct gw_vm_info *info = vmm_kvm.info(vm);
	struct gw_bitmap got[2], prev;
	struct gw_dirty d = { 0 };
	uint64_t y[NR_VCPUS], x[NR_VCPUS], px[NR_VCPUS], ws_end = 0, wrote = 0;
	struct kvm_guest_report rep;

	TEST_ASSERT(vmm_kvm.start(vm) == 0, "start");
	kvm_test_wait_progress(vm, 100);
	TEST_ASSERT(gw_dirty_select(&d, info, c->id) == 0, "%s: select", c->name);
	TEST_ASSERT(d.ops->id == c->id, "%s: got %s", c->name, d.ops->name);
	TEST_ASSERT(d.ops->start(&d) == 0, "%s: start", c->name);
	for (unsigned b = 0; b < 2; b++)
		TEST_ASSERT(gw_bitmap_init(&got[b], info->blocks[b].size_bytes / GW_PAGE_BYTES) == 0, "bm");
	TEST_ASSERT(gw_bitmap_init(&prev, got[1].nr_bits) == 0, "bm");
	for (unsigned i = 0; i < NR_VCPUS; i++) {
		const struct gw_vcpu_area *a = kvm_test_area(vm, i);

		ws_end = a->first_page + a->nr_pages > ws_end ? a->first_page + a->nr_pages : ws_end;
	}
	read_counters(vm, y);
	/* At least ROUNDS harvests, and on until the guest did enough (speed never decides). */
	for (unsigned r = 0; r < ROUNDS || wrote < MIN_WRITES || (c->expect_full && !full_seen(vm)); r++) {
		kvm_test_sleep_ms(5 + (r * 37) % 60);
		read_counters(vm, x);
		TEST_ASSERT(d.ops->collect(&d, got) >= 0, "%s: collect", c->name);
		rearm(&d, info);
		for (unsigned i = 0; i < NR_VCPUS; i++) {
			uint64_t miss = missing(vm, i, y[i] + 1, x[i], &got[1]);

			wrote += x[i] - y[i];
			TEST_CHECK(miss == 0, "%s round %u vCPU %u: %llu written pages not reported (t %llu..%llu)",
				   c->name, r, i, (unsigned long long)miss, (unsigned long long)y[i] + 1,
				   (unsigned long long)x[i]);
			/* t in [X', Y'] of the previous round, those written by now (< X). */
			miss = r ? missing_either(vm, i, px[i], y[i] + 1 < x[i] ? y[i] + 1 : x[i],
						  &prev, &got[1]) : 0;
			TEST_CHECK(miss == 0, "%s round %u vCPU %u: %llu pages written during the previous "
				   "collect and re-arm lost", c->name, r, i, (unsigned long long)miss);
			px[i] = x[i];
		}
		if (x[0] > y[0] + 1)	/* the guest wrote: its counters' page is reported */
			TEST_CHECK(gw_bitmap_test(&got[0], GW_GUEST_VCPU_AREA_GPA / GW_PAGE_BYTES),
				   "%s round %u: vCPU area page not reported", c->name, r);
		if (gw_bitmap_weight(&got[1]) < got[1].nr_bits)	/* not a full resend */
			TEST_CHECK(gw_bitmap_next_set(&got[1], ws_end) == got[1].nr_bits,
				   "%s round %u: page %llu outside the working set reported", c->name, r,
				   (unsigned long long)gw_bitmap_next_set(&got[1], ws_end));
		gw_bitmap_zero(&prev);
		gw_bitmap_or(&prev, &got[1]);
		gw_bitmap_zero(&got[0]);
		gw_bitmap_zero(&got[1]);
		read_counters(vm, y);
	}
	d.ops->stop(&d);
	vmm_kvm_guest_report(vm, &rep);
	printf("%s: %llu pages written, %llu ring-full exits\n", c->name,
	       (unsigned long long)wrote, (unsigned long long)rep.dirty_ring_full_exits);
	gw_bitmap_free(&got[0]);
	gw_bitmap_free(&got[1]);
	gw_bitmap_free(&prev);
	vmm_kvm.destroy(vm);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(280);
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		run(&configs[i]);
	TEST_EXIT();
}
