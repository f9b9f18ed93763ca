/* SPDX-License-Identifier: MIT */
/*
 * Invariant (kvm-log and kvm-ring, as the engine drives them): every page
 * the guest writes after tracking starts is reported by a collect that may
 * have seen the write; none is lost between harvests; block "ram" reports no
 * page outside the working set; block "sys" reports the vCPU areas the
 * guests keep writing.
 *
 * The dirty guest writes its slice in order and publishes `written` = t
 * after writing page t, so page t was written after the last counter read
 * that returned less than t and before the first that returned more than t.
 * The test reads the counters before each collect (X) and after each re-arm
 * (Y). Per round (strict): pages t in [Y' + 1, X) were written after the
 * previous re-arm and before this collect, which reports them. At the end
 * (exact): every page written since start is in one of the reports from the
 * first collect after the read before its write to the first collect after
 * the read that follows it (a write during a collect and its re-arm may be
 * in that report, since the engine reads the page after the re-arm, or in
 * the next one).
 *
 * kvm-log: round 0 first (the populated pages read, as the engine does),
 * then after each collect the test clears every chunk of 100 pages (not
 * a multiple of 64: KVM_CLEAR_DIRTY_LOG wants 64-page alignment, the
 * backend widens and masks) with the reported pages as the pages read, as
 * the engine does before sending; on RAM mostly holes (INITIALLY_SET: most
 * of the working set is found populated by a collect, not armed by round 0)
 * and on populated RAM (the slots write-protected at start).
 * kvm-ring: a large ring, and a 256-entry ring that fills: its vCPUs must
 * exit with KVM_EXIT_DIRTY_RING_FULL and keep running after the reaper
 * resets the rings (an overflow, where the host's KVM lets one happen, turns
 * into a full resend, a superset).
 */
#include <stdio.h>
#include <stdlib.h>
#include <godwit/godwit.h>
#include "kvm_test.h"
#include "mem/dirty.h"
#include "mem/populated.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define ROUNDS 30
#define MAX_ROUNDS 400
#define MIN_WRITES 1000
#define CLEAR_CHUNK_PAGES 100u
#define NR_VCPUS 2

struct config {
	const char *name;
	enum gw_dirty_backend_id id;
	enum kvm_dirty_mode mode;
	uint32_t ring_entries;
	const char *workload;
	enum vmm_fill fill;
	int initially_set;		/* kvm-log: the mode its start must log (-1: ring) */
	bool expect_full;		/* the ring must fill (RING_FULL exits) */
};

static const struct config configs[] = {
	/* RAM mostly holes: KVM_DIRTY_LOG_INITIALLY_SET, pages armed as read or found populated */
	{ "kvm-log byte", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, "dirty:ws=64M,pattern=byte", VMM_FILL_NONE,
	  1, false },
	{ "kvm-log page", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, "dirty:ws=2M,pattern=page", VMM_FILL_NONE,
	  1, false },
	/* RAM populated: the slots write-protected when logging starts */
	{ "kvm-log dense", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, "dirty:ws=64M,pattern=byte", VMM_FILL_ZERO,
	  0, false },
	{ "kvm-ring byte", GW_DIRTY_KVM_RING, KVM_DIRTY_MODE_RING, 16384, "dirty:ws=64M,pattern=byte",
	  VMM_FILL_ZERO, -1, false },
	{ "kvm-ring small", GW_DIRTY_KVM_RING, KVM_DIRTY_MODE_RING, 256, "dirty:ws=64M,pattern=byte",
	  VMM_FILL_ZERO, -1, true },
};

/* Counter reads of one vCPU, round by round (round 0: after start). */
struct history {
	unsigned nr_rounds;		/* collects done */
	uint64_t x[MAX_ROUNDS + 1];	/* before collect r (r >= 1) */
	uint64_t y[MAX_ROUNDS + 1];	/* after re-arm r (y[0]: after start) */
};

struct run {
	const struct config *c;
	struct vmm *vm;
	const struct gw_vm_info *info;
	struct gw_dirty d;
	struct gw_bitmap sys;		/* the current report of block "sys" */
	struct gw_bitmap *ram[MAX_ROUNDS + 1];	/* reports of block "ram", by round */
	struct history h[NR_VCPUS];
	uint64_t ws_end;		/* first page past every slice */
};

static uint64_t counter(struct vmm *vm, unsigned i)
{
	return __atomic_load_n(&kvm_test_area(vm, i)->written, __ATOMIC_ACQUIRE);
}

/* Pages of vCPU @i written for t in [from, to), not in @got. */
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

/* Lowest and highest collect that may report the write of page t. */
static void window(const struct history *h, uint64_t t, unsigned *lo, unsigned *hi)
{
	*lo = 1;
	for (unsigned r = 1; r <= h->nr_rounds; r++) {
		if (h->x[r] < t)
			*lo = r;	/* written after this read: collect r at the earliest */
		if (h->y[r] < t)
			*lo = r + 1;	/* written after re-arm r */
	}
	*hi = h->nr_rounds;
	for (unsigned r = h->nr_rounds; r >= 1; r--) {
		if (h->y[r] > t && r < h->nr_rounds)
			*hi = r + 1;	/* written before this read: collect r + 1 at the latest */
		if (h->x[r] > t)
			*hi = r;	/* written before collect r */
	}
}

static uint64_t check_history(struct run *rn, unsigned i)
{
	const struct gw_vcpu_area *a = kvm_test_area(rn->vm, i);
	const struct history *h = &rn->h[i];
	uint64_t miss = 0;

	for (uint64_t t = h->y[0] + 1; t < h->x[h->nr_rounds]; t++) {
		uint64_t page = a->first_page + t % a->nr_pages;
		unsigned lo, hi, r;

		window(h, t, &lo, &hi);
		for (r = lo; r <= hi; r++)
			if (gw_bitmap_test(rn->ram[r], page))
				break;
		if (r > hi && ++miss <= 3)
			fprintf(stderr, "%s vCPU %u: page %llu (t %llu) in none of reports %u..%u\n",
				rn->c->name, i, (unsigned long long)page, (unsigned long long)t, lo, hi);
	}
	return miss;
}

/*
 * The engine's clear before sending, chunk by chunk (kvm-log only): @read
 * (a bitmap per block) holds the pages read now, the mask of each chunk.
 */
static void rearm(struct run *rn, const struct gw_bitmap *read)
{
	if (!rn->d.ops->clear)
		return;
	for (unsigned b = 0; b < rn->info->nr_blocks; b++) {
		uint64_t pages = rn->info->blocks[b].size_bytes / GW_PAGE_BYTES;

		for (uint64_t p = 0; p < pages; p += CLEAR_CHUNK_PAGES) {
			uint64_t n = pages - p < CLEAR_CHUNK_PAGES ? pages - p : CLEAR_CHUNK_PAGES;
			uint64_t mask[(CLEAR_CHUNK_PAGES + 63) / 64] = { 0 };

			for (uint64_t i = 0; i < n; i++)
				if (gw_bitmap_test(&read[b], p + i))
					mask[i / 64] |= 1ull << (i % 64);
			TEST_ASSERT(rn->d.ops->clear(&rn->d, b, p, n, mask) == 0, "clear");
		}
	}
}

/* Round 0 as the engine makes it: the populated pages, read once each. */
static void round0(struct run *rn)
{
	struct gw_bitmap pop[GW_MAX_RAM_BLOCKS];

	for (unsigned b = 0; b < rn->info->nr_blocks; b++) {
		TEST_ASSERT(gw_bitmap_init(&pop[b], rn->info->blocks[b].size_bytes / GW_PAGE_BYTES) == 0, "bm");
		if (gw_populated_scan(&rn->info->blocks[b], &pop[b], NULL) < 0)
			gw_bitmap_set_all(&pop[b]);
	}
	rearm(rn, pop);
	for (unsigned b = 0; b < rn->info->nr_blocks; b++)
		gw_bitmap_free(&pop[b]);
}

static uint64_t full_exits(struct vmm *vm)
{
	struct kvm_guest_report rep;

	vmm_kvm_guest_report(vm, &rep);
	return rep.dirty_ring_full_exits;
}

/* One harvest: read X, collect, re-arm, read Y; the per-round checks. */
static uint64_t round_once(struct run *rn, unsigned r)
{
	struct gw_bitmap got[2];
	uint64_t wrote = 0;

	TEST_ASSERT(gw_bitmap_init(&got[1], rn->info->blocks[1].size_bytes / GW_PAGE_BYTES) == 0, "bm");
	got[0] = rn->sys;
	for (unsigned i = 0; i < NR_VCPUS; i++)
		rn->h[i].x[r] = counter(rn->vm, i);
	TEST_ASSERT(rn->d.ops->collect(&rn->d, got) >= 0, "%s: collect", rn->c->name);
	rearm(rn, got);
	for (unsigned i = 0; i < NR_VCPUS; i++) {
		struct history *h = &rn->h[i];
		uint64_t miss = missing(rn->vm, i, h->y[r - 1] + 1, h->x[r], &got[1]);

		h->y[r] = counter(rn->vm, i);
		h->nr_rounds = r;
		wrote += h->x[r] - h->y[r - 1];
		TEST_CHECK(miss == 0, "%s round %u vCPU %u: %llu pages written after the re-arm not reported",
			   rn->c->name, r, i, (unsigned long long)miss);
	}
	if (rn->h[0].x[r] > rn->h[0].y[r - 1] + 1)	/* the guest wrote: its area's page too */
		TEST_CHECK(gw_bitmap_test(&got[0], GW_GUEST_VCPU_AREA_GPA / GW_PAGE_BYTES),
			   "%s round %u: vCPU area page not reported", rn->c->name, r);
	if (gw_bitmap_weight(&got[1]) < got[1].nr_bits)	/* not a full resend */
		TEST_CHECK(gw_bitmap_next_set(&got[1], rn->ws_end) == got[1].nr_bits,
			   "%s round %u: page %llu outside the working set reported", rn->c->name, r,
			   (unsigned long long)gw_bitmap_next_set(&got[1], rn->ws_end));
	gw_bitmap_zero(&rn->sys);
	rn->ram[r] = malloc(sizeof(struct gw_bitmap));
	TEST_ASSERT(rn->ram[r], "malloc");
	*rn->ram[r] = got[1];
	return wrote;
}

static void run(const struct config *c)
{
	struct kvm_vm_opts opts = { .dirty = c->mode, .ring_entries = c->ring_entries,
				    .guest_recheck = 0 };
	struct run *rn = calloc(1, sizeof(*rn));
	uint64_t wrote = 0, miss = 0;
	unsigned r, mode_logs;

	TEST_ASSERT(rn, "calloc");
	rn->c = c;
	rn->vm = kvm_test_vm(128 << 20, NR_VCPUS, c->workload, c->fill, &opts);
	rn->info = vmm_kvm.info(rn->vm);
	TEST_ASSERT(vmm_kvm.start(rn->vm) == 0, "start");
	kvm_test_wait_progress(rn->vm, 100);
	TEST_ASSERT(gw_dirty_select(&rn->d, rn->info, c->id) == 0 && rn->d.ops->id == c->id,
		    "%s: select", c->name);
	mode_logs = kvm_test_log_count(c->initially_set == 1 ? "initially_set=1" : "initially_set=0");
	TEST_ASSERT(rn->d.ops->start(&rn->d) == 0, "%s: start", c->name);
	if (c->initially_set >= 0)
		TEST_CHECK(kvm_test_log_count(c->initially_set ? "initially_set=1" : "initially_set=0") ==
			   mode_logs + 1, "%s: started with initially_set=%d", c->name, c->initially_set);
	round0(rn);
	TEST_ASSERT(gw_bitmap_init(&rn->sys, rn->info->blocks[0].size_bytes / GW_PAGE_BYTES) == 0, "bm");
	for (unsigned i = 0; i < NR_VCPUS; i++) {
		const struct gw_vcpu_area *a = kvm_test_area(rn->vm, i);

		if (a->first_page + a->nr_pages > rn->ws_end)
			rn->ws_end = a->first_page + a->nr_pages;
		rn->h[i].y[0] = counter(rn->vm, i);
	}
	/* At least ROUNDS harvests, and on until the guest did enough (speed never decides). */
	for (r = 1; r <= MAX_ROUNDS && (r <= ROUNDS || wrote < MIN_WRITES ||
					(c->expect_full && !full_exits(rn->vm))); r++) {
		kvm_test_sleep_ms(5 + (r * 37) % 60);
		wrote += round_once(rn, r);
	}
	rn->d.ops->stop(&rn->d);
	for (unsigned i = 0; i < NR_VCPUS; i++)
		miss += check_history(rn, i);
	TEST_CHECK(miss == 0, "%s: %llu written pages in no report that could have seen them", c->name,
		   (unsigned long long)miss);
	printf("%s: %llu pages written over %u harvests, %llu ring-full exits\n", c->name,
	       (unsigned long long)wrote, r - 1, (unsigned long long)full_exits(rn->vm));
	for (unsigned i = 1; i < r; i++) {
		gw_bitmap_free(rn->ram[i]);
		free(rn->ram[i]);
	}
	gw_bitmap_free(&rn->sys);
	vmm_kvm.destroy(rn->vm);
	free(rn);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(280);
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		run(&configs[i]);
	TEST_EXIT();
}
