/* SPDX-License-Identifier: MIT */
/*
 * What the soft vCPUs do: each runs the VM's workload (vmm/workload.h) on
 * its slice of the working set, between checkpoints.
 *
 *   idle     sleep; one unit of progress per ~1 ms tick.
 *   dirty    rewrite the slice over and over: one 8-byte word per page
 *            (pattern=byte) or the whole page (pattern=page).
 *   verify   pass after pass, rewrite every page of the slice whole with
 *            vmm_verify_page(page, gen), keeping the verify invariant of
 *            vmm/workload.h between any two checkpoints.
 * dirty and verify write at most `rate` pages per second over all vCPUs
 * (0 = full speed); progress counts pages written.
 *
 * Threads: each vCPU thread owns its struct soft_vcpu fields while running;
 * it checks the pause flag at least every SOFT_CHECK_EVERY_PAGES pages.
 */
#include <time.h>
#include <godwit/log.h>
#include "soft/soft_internal.h"

#define IDLE_TICK_NS 1000000ull
#define RATE_MAX_SLEEP_NS 10000000ull	/* stay responsive to pause */

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

void soft_run_layout(struct soft_vm *vm)
{
	vm->ws_pages = vmm_workload_ws_pages(&vm->wl, vm->ram_pages);
	vmm_workload_format(&vm->wl, vm->ws_pages, vm->spec, sizeof(vm->spec));
	vm->info.nr_vcpus = vm->nr_vcpus;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		uint64_t first = vm->ws_pages * i / vm->nr_vcpus;
		uint64_t end = vm->ws_pages * (i + 1) / vm->nr_vcpus;

		v->first_page = first;
		v->nr_pages = end - first;
		v->cursor = 0;
		v->gen = 1;
	}
}

static void run_idle(struct soft_vcpu *v)
{
	bool parked;

	while (!soft_vcpu_checkpoint(v, &parked)) {
		sleep_ns(IDLE_TICK_NS);
		atomic_fetch_add_explicit(&v->progress, 1, memory_order_relaxed);
	}
}

/*
 * Pacing of a vCPU at its share of the workload's rate (pages per second
 * over all vCPUs; 0 = full speed). Work is done in batches of at most
 * SOFT_CHECK_EVERY_PAGES pages; about 100 batches per second at low rates.
 */
struct pacer {
	uint64_t rate_pps;		/* this vCPU's share, 0 = full speed */
	unsigned batch_pages;
	uint64_t base_ns, pages_since_base;
};

static void pacer_init(struct pacer *pc, const struct soft_vcpu *v, uint64_t rate_pps)
{
	unsigned nr = v->vm->nr_vcpus;

	pc->batch_pages = SOFT_CHECK_EVERY_PAGES;
	pc->rate_pps = rate_pps ? rate_pps / (nr ? nr : 1) : 0;
	if (rate_pps && !pc->rate_pps)
		pc->rate_pps = 1;
	if (pc->rate_pps && pc->rate_pps / 100 < pc->batch_pages)
		pc->batch_pages = pc->rate_pps / 100 ? (unsigned)(pc->rate_pps / 100) : 1;
	pc->base_ns = gw_now_ns();
	pc->pages_since_base = 0;
}

/* After a batch of @pages: sleep until the rate allows the next one. */
static void pacer_wait(struct pacer *pc, bool parked, unsigned pages)
{
	uint64_t due_ns, t;

	if (!pc->rate_pps)
		return;
	if (parked) {		/* a pause is not owed back */
		pc->base_ns = gw_now_ns();
		pc->pages_since_base = 0;
	}
	pc->pages_since_base += pages;
	due_ns = pc->base_ns + pc->pages_since_base * 1000000000ull / pc->rate_pps;
	t = gw_now_ns();
	if (due_ns > t)
		sleep_ns(due_ns - t < RATE_MAX_SLEEP_NS ? due_ns - t : RATE_MAX_SLEEP_NS);
}

/* Next page of the slice; wraps to the next generation. */
static uint64_t cursor_advance(struct soft_vcpu *v)
{
	uint64_t page = v->first_page + v->cursor;

	if (++v->cursor == v->nr_pages) {
		v->cursor = 0;
		v->gen++;
	}
	return page;
}

static void write_dirty(struct soft_vcpu *v, bool pattern_page)
{
	uint64_t val = v->gen << 20 ^ v->cursor;
	uint64_t *p = (uint64_t *)soft_page_ptr(v->vm, cursor_advance(v));

	if (pattern_page) {
		for (unsigned k = 0; k < SOFT_PAGE_BYTES / 8; k++)
			p[k] = val + k;
	} else {
		p[(v->gen * 8 + 1) % (SOFT_PAGE_BYTES / 8)] = val;
	}
}

static void write_verify(struct soft_vcpu *v)
{
	uint64_t page = v->first_page + v->cursor;

	/* Written whole before the cursor moves (the verify invariant). */
	vmm_verify_page(page, v->gen, (uint64_t *)soft_page_ptr(v->vm, page));
	cursor_advance(v);
}

/* dirty and verify: batches of page writes at the workload's rate. */
static void run_writer(struct soft_vcpu *v)
{
	const struct vmm_workload *wl = &v->vm->wl;
	struct pacer pc;
	bool parked;

	pacer_init(&pc, v, wl->rate_pps);
	while (!soft_vcpu_checkpoint(v, &parked)) {
		if (!v->nr_pages) {
			sleep_ns(IDLE_TICK_NS);
			continue;
		}
		for (unsigned i = 0; i < pc.batch_pages; i++) {
			if (wl->kind == VMM_WL_VERIFY)
				write_verify(v);
			else
				write_dirty(v, wl->pattern_page);
		}
		atomic_fetch_add_explicit(&v->progress, pc.batch_pages, memory_order_relaxed);
		pacer_wait(&pc, parked, pc.batch_pages);
	}
}

void *soft_run_vcpu(void *vcpu)
{
	struct soft_vcpu *v = vcpu;

	if (v->vm->wl.kind == VMM_WL_IDLE)
		run_idle(v);
	else
		run_writer(v);
	return NULL;
}
