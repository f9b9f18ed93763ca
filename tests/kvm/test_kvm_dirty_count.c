/* SPDX-License-Identifier: MIT */
/*
 * Invariant (kvm-log, kvm-ring, uffd-wp on a KVM guest): what a collect
 * returns, the count the dirty rate, auto-converge's trigger and the dirty
 * limit read, is the pages it reports that were re-armed since their last
 * report, each once, and so stays between the distinct pages the guest
 * wrote in the narrowest window the collect must have seen and those of
 * the widest it may have seen (plus a fixed slack for block "sys": the
 * vCPU areas, stacks and page tables), whatever the time between harvests
 * and however long pages wait for their clear. A count that took in the
 * pages still waiting for their clear grew round after round at a constant
 * guest rate.
 *
 * The guest writes its slice in order, at a paced rate (a few pages per
 * harvest, far fewer than its slice), and publishes `written` = k + 1 after
 * writing page k (page first_page + k % nr_pages). A counter read that
 * returns v follows every write k < v and precedes every write k > v. The
 * test reads the counters before each collect (A) and after its re-arm (B):
 * collect r must report every write k in [B(r-1) + 1, A(r) - 1] and may
 * report those in [A(r-1), B(r)], no other.
 *
 * The engine re-arms a page (kvm-log's clear) only just before it sends
 * it: a round cut mid-pass, or one pass at a capped rate, leaves reported
 * pages uncleared for many harvests. The test clears every reported page
 * after one collect in CLEAR_EVERY and none after the others. Its model
 * of the pages reported and not cleared since (`pending`) must match the
 * count exactly: count = pages reported now and not pending. Timing never
 * decides: the bounds come from the guest's own counters.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <godwit/godwit.h>
#include "kvm_test.h"
#include "mem/dirty.h"
#include "mem/populated.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define ROUNDS 24
#define MAX_ROUNDS 400
#define MIN_WRITES 600		/* guest writes over the run, at least */
#define CLEAR_EVERY 4		/* kvm-log: clear after one collect in this many */
#define SYS_SLACK_PAGES 32	/* block "sys": vCPU areas, stacks, page tables */
#define NR_VCPUS 2

struct config {
	const char *name;
	enum gw_dirty_backend_id id;
	enum kvm_dirty_mode mode;
	uint32_t ring_entries;
	enum vmm_fill fill;
};

/* 1000 pages/s over 64 MiB: 500 per vCPU, a slice of 8192 pages wraps after 16 s. */
#define WORKLOAD "dirty:ws=64M,pattern=page,rate=1000"

static const struct config configs[] = {
	{ "kvm-log holes", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, VMM_FILL_NONE },	/* INITIALLY_SET */
	{ "kvm-log dense", GW_DIRTY_KVM_LOG, KVM_DIRTY_MODE_LOG, 0, VMM_FILL_ZERO },
	{ "kvm-ring", GW_DIRTY_KVM_RING, KVM_DIRTY_MODE_RING, 16384, VMM_FILL_ZERO },
	{ "uffd-wp", GW_DIRTY_UFFD_WP, KVM_DIRTY_MODE_LOG, 0, VMM_FILL_ZERO },
};

struct run {
	const struct config *c;
	struct vmm *vm;
	const struct gw_vm_info *info;
	struct gw_dirty d;
	struct gw_bitmap pending[GW_MAX_RAM_BLOCKS];	/* reported, not cleared since */
	uint64_t a[NR_VCPUS], b[NR_VCPUS];		/* the previous round's reads */
	uint64_t counted, wrote;
};

static uint64_t counter(struct vmm *vm, unsigned i)
{
	return __atomic_load_n(&kvm_test_area(vm, i)->written, __ATOMIC_ACQUIRE);
}

/* Mark in @bm the pages of vCPU @i's writes k in [@from, @to] (none when to < from). */
static void writes(struct vmm *vm, unsigned i, uint64_t from, uint64_t to, struct gw_bitmap *bm)
{
	const struct gw_vcpu_area *a = kvm_test_area(vm, i);
	uint64_t n = a->nr_pages;

	if (to < from || !n)
		return;
	if (to - from >= n)
		from = to - n + 1;
	for (uint64_t k = from; k <= to; k++)
		gw_bitmap_set(bm, a->first_page + k % n);
}

/* |@x \ @y| */
static uint64_t weight_andnot(const struct gw_bitmap *x, const struct gw_bitmap *y)
{
	uint64_t n = 0;

	for (uint64_t p = gw_bitmap_next_set(x, 0); p < x->nr_bits; p = gw_bitmap_next_set(x, p + 1))
		n += !gw_bitmap_test(y, p);
	return n;
}

/* The engine's clear of every page in @read (kvm-log), whole blocks in 64-page chunks. */
static void rearm(struct run *rn, const struct gw_bitmap *read)
{
	if (!rn->d.ops->clear)
		return;
	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++) {
		uint64_t pages = read[bi].nr_bits;

		for (uint64_t p = 0; p < pages; p += 64) {
			uint64_t n = pages - p < 64 ? pages - p : 64;
			uint64_t mask = read[bi].words[p / 64];

			TEST_ASSERT(rn->d.ops->clear(&rn->d, bi, p, n, &mask) == 0, "clear");
		}
		gw_bitmap_zero(&rn->pending[bi]);
	}
}

/* Round 0 as the engine makes it: the populated pages, read (cleared) once each. */
static void round0(struct run *rn)
{
	struct gw_bitmap pop[GW_MAX_RAM_BLOCKS];

	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++) {
		TEST_ASSERT(gw_bitmap_init(&pop[bi], rn->pending[bi].nr_bits) == 0, "bitmap");
		if (gw_populated_scan(&rn->info->blocks[bi], &pop[bi], NULL) < 0)
			gw_bitmap_set_all(&pop[bi]);
	}
	rearm(rn, pop);
	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++)
		gw_bitmap_free(&pop[bi]);
}

/* One harvest and its checks; the writes it had to see, summed over vCPUs. */
static uint64_t round_once(struct run *rn, unsigned r)
{
	const unsigned ram = 1;
	struct gw_bitmap got[GW_MAX_RAM_BLOCKS], must, may;
	uint64_t a[NR_VCPUS], b[NR_VCPUS], fresh[GW_MAX_RAM_BLOCKS], fresh_all = 0, must_new, may_n;
	uint64_t wrote = 0;
	ssize_t n;

	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++)
		TEST_ASSERT(gw_bitmap_init(&got[bi], rn->pending[bi].nr_bits) == 0, "bitmap");
	TEST_ASSERT(gw_bitmap_init(&must, got[ram].nr_bits) == 0 && gw_bitmap_init(&may, got[ram].nr_bits) == 0,
		    "bitmap");
	for (unsigned i = 0; i < NR_VCPUS; i++)
		a[i] = counter(rn->vm, i);
	n = rn->d.ops->collect(&rn->d, got);
	TEST_ASSERT(n >= 0, "%s: collect", rn->c->name);
	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++) {
		fresh[bi] = weight_andnot(&got[bi], &rn->pending[bi]);
		fresh_all += fresh[bi];
	}
	for (unsigned i = 0; i < NR_VCPUS; i++) {
		if (a[i] > 0)
			writes(rn->vm, i, rn->b[i] + 1, a[i] - 1, &must);
		wrote += a[i] > rn->b[i] + 1 ? a[i] - 1 - rn->b[i] : 0;
	}
	must_new = weight_andnot(&must, &rn->pending[ram]);	/* a pending page is not counted again */
	if (rn->d.ops->clear && r % CLEAR_EVERY == 0) {
		rearm(rn, got);
	} else if (rn->d.ops->clear) {
		for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++)
			gw_bitmap_or(&rn->pending[bi], &got[bi]);
	}
	for (unsigned i = 0; i < NR_VCPUS; i++) {
		b[i] = counter(rn->vm, i);
		writes(rn->vm, i, rn->a[i], b[i], &may);
	}
	/* Every write it must have seen is in the report: none lost (test_kvm_dirty checks more). */
	TEST_CHECK(weight_andnot(&must, &got[ram]) == 0, "%s round %u: %llu pages written before the collect "
		   "and after the previous re-arm not reported", rn->c->name, r,
		   (unsigned long long)weight_andnot(&must, &got[ram]));
	/* The count is the pages reported and not waiting for their clear, each once. */
	TEST_CHECK((uint64_t)n == fresh_all, "%s round %u: collect counted %zd pages, reported %llu not "
		   "reported before (and %llu reported before, not cleared since)", rn->c->name, r, n,
		   (unsigned long long)fresh_all,
		   (unsigned long long)(gw_bitmap_weight(&got[0]) + gw_bitmap_weight(&got[ram]) - fresh_all));
	/* Against the guest's own writes: no fewer than it must have seen, no more than it may have. */
	may_n = gw_bitmap_weight(&may);
	if (gw_bitmap_weight(&got[ram]) < got[ram].nr_bits) {	/* not a ring overflow's full resend */
		TEST_CHECK(fresh[ram] >= must_new && fresh[ram] <= may_n,
			   "%s round %u: %llu new pages of block ram counted, the guest wrote %llu to %llu "
			   "distinct new pages in the windows", rn->c->name, r, (unsigned long long)fresh[ram],
			   (unsigned long long)must_new, (unsigned long long)may_n);
		TEST_CHECK((uint64_t)n <= may_n + SYS_SLACK_PAGES, "%s round %u: collect counted %zd pages, the "
			   "guest wrote at most %llu distinct pages since the previous collect (+%u for sys)",
			   rn->c->name, r, n, (unsigned long long)may_n, SYS_SLACK_PAGES);
	}
	rn->counted += (uint64_t)n;
	for (unsigned i = 0; i < NR_VCPUS; i++) {
		rn->a[i] = a[i];
		rn->b[i] = b[i];
	}
	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++)
		gw_bitmap_free(&got[bi]);
	gw_bitmap_free(&must);
	gw_bitmap_free(&may);
	return wrote;
}

static void run(const struct config *c)
{
	struct kvm_vm_opts opts = { .dirty = c->mode, .ring_entries = c->ring_entries, .guest_recheck = 0 };
	struct run *rn = calloc(1, sizeof(*rn));
	uint64_t total = 0;
	unsigned r;
	int ret;

	TEST_ASSERT(rn, "calloc");
	rn->c = c;
	rn->vm = kvm_test_vm(128 << 20, NR_VCPUS, WORKLOAD, c->fill, &opts);
	rn->info = vmm_kvm.info(rn->vm);
	TEST_ASSERT(vmm_kvm.start(rn->vm) == 0, "start");
	kvm_test_wait_progress(rn->vm, 10);
	ret = gw_dirty_select(&rn->d, rn->info, c->id);
	if (ret == -EOPNOTSUPP) {
		printf("%s: not here (probe says no), skipped\n", c->name);
		vmm_kvm.destroy(rn->vm);
		free(rn);
		return;
	}
	TEST_ASSERT(ret == 0 && rn->d.ops->id == c->id, "%s: select", c->name);
	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++)
		TEST_ASSERT(gw_bitmap_init(&rn->pending[bi], rn->info->blocks[bi].size_bytes / GW_PAGE_BYTES) == 0,
			    "bitmap");
	for (unsigned i = 0; i < NR_VCPUS; i++)
		rn->a[i] = counter(rn->vm, i);
	TEST_ASSERT(rn->d.ops->start(&rn->d) == 0, "%s: start", c->name);
	round0(rn);
	for (unsigned i = 0; i < NR_VCPUS; i++)
		rn->b[i] = counter(rn->vm, i);
	/* At least ROUNDS harvests, and on until the guest did enough (speed never decides). */
	for (r = 1; r <= MAX_ROUNDS && (r <= ROUNDS || total < MIN_WRITES); r++) {
		kvm_test_sleep_ms(20 + (r * 37) % 80);
		total += round_once(rn, r);
	}
	rn->d.ops->stop(&rn->d);
	printf("%s: %u harvests counted %llu pages; the guest wrote %llu between them for sure\n", c->name,
	       r - 1, (unsigned long long)rn->counted, (unsigned long long)total);
	for (unsigned bi = 0; bi < rn->info->nr_blocks; bi++)
		gw_bitmap_free(&rn->pending[bi]);
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
