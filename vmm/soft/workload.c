/* SPDX-License-Identifier: MIT */
/*
 * What the soft vCPUs do.
 *
 *   idle                 sleep; one unit of progress per ~1 ms tick.
 *   dirty[:ws=SIZE,pattern=byte|page,rate=PAGES_PER_SECOND]
 *                        rewrite the working set (default 256M, at most all
 *                        RAM) over and over: one 8-byte word per page (byte)
 *                        or the whole page (page); rate is over all vCPUs,
 *                        0 = full speed. Progress: pages written.
 *   verify[:ws=SIZE,rate=PAGES_PER_SECOND]
 *                        (default: all RAM, full speed) pass after pass,
 *                        rewrite every page of the slice whole with
 *                        soft_verify_page(page, gen); rate as for dirty.
 *                        Progress: pages written.
 *
 * A rate makes the dirty rate independent of the machine's speed: tests that
 * need a migration to converge use one, so their outcome never depends on
 * how fast this machine's guest writes relative to its link.
 *
 * Verify invariant, kept between any two checkpoints: with slice offset
 * `cursor` and generation `gen` (>= 1), pages [0, cursor) of the slice hold
 * soft_verify_page(page, gen) and pages [cursor, n) hold generation gen-1;
 * generation 0 means "never written by the workload": the initial fill
 * content of that page. A page is written whole before the cursor moves.
 *
 * Threads: each vCPU thread owns its struct soft_vcpu fields while running;
 * it checks the pause flag at least every SOFT_CHECK_EVERY_PAGES pages.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "soft/soft_internal.h"

#define IDLE_TICK_NS 1000000ull
#define RATE_MAX_SLEEP_NS 10000000ull	/* stay responsive to pause */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
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
	unsigned nr = soft_vm_info(v->vm)->nr_vcpus;

	pc->batch_pages = SOFT_CHECK_EVERY_PAGES;
	pc->rate_pps = rate_pps ? rate_pps / (nr ? nr : 1) : 0;
	if (rate_pps && !pc->rate_pps)
		pc->rate_pps = 1;
	if (pc->rate_pps && pc->rate_pps / 100 < pc->batch_pages)
		pc->batch_pages = pc->rate_pps / 100 ? (unsigned)(pc->rate_pps / 100) : 1;
	pc->base_ns = now_ns();
	pc->pages_since_base = 0;
}

/* After a batch of @pages: sleep until the rate allows the next one. */
static void pacer_wait(struct pacer *pc, bool parked, unsigned pages)
{
	uint64_t due_ns, t;

	if (!pc->rate_pps)
		return;
	if (parked) {		/* a pause is not owed back */
		pc->base_ns = now_ns();
		pc->pages_since_base = 0;
	}
	pc->pages_since_base += pages;
	due_ns = pc->base_ns + pc->pages_since_base * 1000000000ull / pc->rate_pps;
	t = now_ns();
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

static void run_dirty(struct soft_vcpu *v)
{
	const struct vmm_workload *wl = soft_vm_wl(v->vm);
	struct pacer pc;
	bool parked;

	pacer_init(&pc, v, wl->rate_pps);
	while (!soft_vcpu_checkpoint(v, &parked)) {
		if (!v->nr_pages) {
			sleep_ns(IDLE_TICK_NS);
			continue;
		}
		for (unsigned i = 0; i < pc.batch_pages; i++) {
			uint64_t val = v->gen << 20 ^ v->cursor;
			uint64_t *p = (uint64_t *)soft_page_ptr(v->vm, cursor_advance(v));

			if (wl->pattern_page) {
				for (unsigned k = 0; k < SOFT_PAGE_BYTES / 8; k++)
					p[k] = val + k;
			} else {
				p[(v->gen * 8 + 1) % (SOFT_PAGE_BYTES / 8)] = val;
			}
		}
		atomic_fetch_add_explicit(&v->progress, pc.batch_pages, memory_order_relaxed);
		pacer_wait(&pc, parked, pc.batch_pages);
	}
}

static void run_verify(struct soft_vcpu *v)
{
	struct pacer pc;
	bool parked;

	pacer_init(&pc, v, soft_vm_wl(v->vm)->rate_pps);
	while (!soft_vcpu_checkpoint(v, &parked)) {
		if (!v->nr_pages) {
			sleep_ns(IDLE_TICK_NS);
			continue;
		}
		for (unsigned i = 0; i < pc.batch_pages; i++) {
			uint64_t page = v->first_page + v->cursor;

			/* Written whole before the cursor moves (the invariant above). */
			vmm_verify_page(page, v->gen, (uint64_t *)soft_page_ptr(v->vm, page));
			cursor_advance(v);
		}
		atomic_fetch_add_explicit(&v->progress, pc.batch_pages, memory_order_relaxed);
		pacer_wait(&pc, parked, pc.batch_pages);
	}
}

void *soft_vcpu_main(void *arg)
{
	struct soft_vcpu *v = arg;

	switch (soft_vm_wl(v->vm)->kind) {
	case VMM_WL_DIRTY:
		run_dirty(v);
		break;
	case VMM_WL_VERIFY:
		run_verify(v);
		break;
	default:
		run_idle(v);
		break;
	}
	return NULL;
}
