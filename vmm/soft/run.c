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
 *   balloon  phase 0 fills the slice like verify (one pass); phase 1 frees
 *            all but the first keep_pages of it (reported with free-page
 *            hints while a migration takes them), rewrites the kept pages
 *            like verify (cursor, gen), and walks the freed part with a
 *            window of W pages in use: each step reallocates the page at
 *            `churn` (writes vmm_verify_page(page, churn_gen)) and frees
 *            the page W behind it, hinting it. Invariant: a page of the
 *            freed part at distance d in 1..W behind churn (wrapping) is in
 *            use and holds churn_gen if it lies before churn, else
 *            churn_gen - 1; every other page there is free.
 *   l2fwd, echo  vCPU 0 runs the guest's NIC driver (net.c), the others idle.
 * dirty, verify and balloon write at most `rate` pages per second over all
 * vCPUs (0 = full speed) and take dirty-limit tokens for what they write;
 * progress counts pages written.
 *
 * Threads: each vCPU thread owns its struct soft_vcpu fields while running;
 * it checks the pause flag at least every SOFT_CHECK_EVERY_PAGES pages.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <godwit/log.h>
#include "soft/soft_internal.h"

#define IDLE_TICK_NS 1000000ull
#define RATE_MAX_SLEEP_NS 10000000ull	/* a pause cuts it short anyway */

void soft_run_slice(const struct vmm_workload *wl, uint64_t ws_pages, unsigned nr_vcpus,
		    unsigned i, struct soft_slice *out)
{
	uint64_t first = ws_pages * i / nr_vcpus, end = ws_pages * (i + 1) / nr_vcpus;

	out->first_page = first;
	out->nr_pages = end - first;
	out->keep_pages = wl->kind != VMM_WL_BALLOON || !ws_pages ? 0 :
			  out->nr_pages * vmm_workload_keep_pages(wl, ws_pages) / ws_pages;
}

void soft_run_layout(struct soft_vm *vm)
{
	char spec[sizeof(vm->base.spec)];

	vm->base.ws_pages = vmm_workload_ws_pages(&vm->base.wl, vm->base.ram_pages);
	vmm_workload_format(&vm->base.wl, vm->base.ws_pages, spec, sizeof(spec));
	pthread_mutex_lock(&vm->base.lock);	/* status readers copy it under lock */
	memcpy(vm->base.spec, spec, sizeof(spec));
	pthread_mutex_unlock(&vm->base.lock);
	vm->base.info.nr_vcpus = vm->base.nr_vcpus;
	for (unsigned i = 0; i < vm->base.nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		struct soft_slice sl;

		soft_run_slice(&vm->base.wl, vm->base.ws_pages, vm->base.nr_vcpus, i, &sl);
		v->first_page = sl.first_page;
		v->nr_pages = sl.nr_pages;
		v->keep_pages = sl.keep_pages;
		v->cursor = 0;
		v->gen = 1;
		v->phase = 0;
		v->churn = 0;
		v->churn_gen = 2;
	}
}

/* @ticks: count the ticks as progress (idle), or not (the spare vCPUs of l2fwd and echo). */
static void run_idle(struct soft_vcpu *v, bool ticks)
{
	bool slept;

	while (!soft_vcpu_checkpoint(v, &slept)) {
		soft_vcpu_sleep(v, IDLE_TICK_NS);
		atomic_fetch_add_explicit(&v->progress, ticks, memory_order_relaxed);
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

/* Count from now on: what came before is not owed back. */
static void pacer_restart(struct pacer *pc)
{
	pc->base_ns = gw_now_ns();
	pc->pages_since_base = 0;
}

static void pacer_init(struct pacer *pc, const struct soft_vcpu *v, uint64_t rate_pps)
{
	unsigned nr = v->vm->base.nr_vcpus;

	pc->batch_pages = SOFT_CHECK_EVERY_PAGES;
	pc->rate_pps = rate_pps ? rate_pps / (nr ? nr : 1) : 0;
	if (rate_pps && !pc->rate_pps)
		pc->rate_pps = 1;
	if (pc->rate_pps && pc->rate_pps / 100 < pc->batch_pages)
		pc->batch_pages = pc->rate_pps / 100 ? (unsigned)(pc->rate_pps / 100) : 1;
	pacer_restart(pc);
}

/* After a batch of @pages: sleep until the rate allows the next one. */
static void pacer_wait(struct soft_vcpu *v, struct pacer *pc, bool slept, unsigned pages)
{
	uint64_t due_ns, t;

	if (!pc->rate_pps)
		return;
	if (slept)		/* a pause or a throttle is not owed back */
		pacer_restart(pc);
	pc->pages_since_base += pages;
	due_ns = pc->base_ns + pc->pages_since_base * 1000000000ull / pc->rate_pps;
	t = gw_now_ns();
	if (due_ns > t)
		soft_vcpu_sleep(v, due_ns - t < RATE_MAX_SLEEP_NS ? due_ns - t : RATE_MAX_SLEEP_NS);
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

/* The page's value and word from the generation that writes it (vmm_dirty_page()). */
static void write_dirty(struct soft_vcpu *v, bool pattern_page)
{
	uint64_t gen = v->gen, val = gen << 20 ^ v->cursor;
	uint64_t *p = (uint64_t *)soft_page_ptr(v->vm, cursor_advance(v));

	if (pattern_page) {
		for (unsigned k = 0; k < SOFT_PAGE_BYTES / 8; k++)
			p[k] = val + k;
	} else {
		p[(gen * 8 + 1) % (SOFT_PAGE_BYTES / 8)] = val;
	}
}

static void write_verify(struct soft_vcpu *v)
{
	uint64_t page = v->first_page + v->cursor;

	/* Written whole before the cursor moves (the verify invariant). */
	vmm_verify_page(page, v->gen, (uint64_t *)soft_page_ptr(v->vm, page));
	cursor_advance(v);
}

/* ---- balloon ---- */

/* The freed part of the slice: [keep_pages, nr_pages); the window, capped by its size. */
static uint64_t freed_pages(const struct soft_vcpu *v)
{
	return v->nr_pages - v->keep_pages;
}

static uint64_t window_of(const struct soft_vm *vm, const struct soft_vcpu *v)
{
	uint64_t m = freed_pages(v);

	return vm->base.wl.window_pages < m ? vm->base.wl.window_pages : m;
}

/* Report pages [first, first + n) of the slice free to the session taking hints (hint_lock). */
static void hint_range(struct soft_vm *vm, const struct soft_vcpu *v, uint64_t first, uint64_t n)
{
	uint64_t page = v->first_page + first;

	pthread_mutex_lock(&vm->hint_lock);
	while (vm->hint_session && n) {
		unsigned bi = soft_block_of(vm, page);
		uint64_t in_block = page - vm->block_first_page[bi];
		uint64_t left = vm->block_first_page[bi + 1] - page, k = n < left ? n : left;

		(void)gw_session_hint_free(vm->hint_session, bi, in_block, k);
		page += k;
		n -= k;
	}
	pthread_mutex_unlock(&vm->hint_lock);
}

/* Every free page of this vCPU's freed part: outside the window (at most two runs). */
static void hint_all_free(struct soft_vm *vm, const struct soft_vcpu *v)
{
	uint64_t m = freed_pages(v), w = window_of(vm, v), start, len;

	if (v->phase != 1 || m == w)
		return;
	/* In use: offsets churn - w .. churn - 1 (wrapping); free: churn .. churn - w - 1. */
	start = v->churn;
	len = m - w;
	if (start + len <= m) {
		hint_range(vm, v, v->keep_pages + start, len);
	} else {
		hint_range(vm, v, v->keep_pages + start, m - start);
		hint_range(vm, v, v->keep_pages, len - (m - start));
	}
}

/* One step in the freed part: reallocate the page at churn, free the one leaving the window. */
static void balloon_churn(struct soft_vm *vm, struct soft_vcpu *v)
{
	uint64_t m = freed_pages(v), w = window_of(vm, v), page, leaving;

	if (!m)
		return;
	page = v->first_page + v->keep_pages + v->churn;
	vmm_verify_page(page, v->churn_gen, (uint64_t *)soft_page_ptr(vm, page));
	if (++v->churn == m) {
		v->churn = 0;
		v->churn_gen++;
	}
	/* Distance w + 1 behind the new churn: free now. */
	leaving = (v->churn + m - w - 1) % m;
	if (w < m)
		hint_range(vm, v, v->keep_pages + leaving, 1);
}

/* The kept part, like verify. */
static void balloon_keep(struct soft_vm *vm, struct soft_vcpu *v)
{
	uint64_t page = v->first_page + v->cursor;

	if (!v->keep_pages)
		return;
	vmm_verify_page(page, v->gen, (uint64_t *)soft_page_ptr(vm, page));
	if (++v->cursor == v->keep_pages) {
		v->cursor = 0;
		v->gen++;
	}
}

static void write_balloon(struct soft_vcpu *v, unsigned i)
{
	struct soft_vm *vm = v->vm;

	if (v->phase == 0) {
		write_verify(v);
		if (v->gen == 1)
			return;
		/* Filled: free all but the kept part; the kept pages hold generation 1. */
		v->phase = 1;
		v->cursor = 0;
		v->gen = 2;
		v->churn = 0;
		v->churn_gen = 2;
		hint_all_free(vm, v);
		return;
	}
	if (i & 1)
		balloon_churn(vm, v);
	else
		balloon_keep(vm, v);
}

int64_t soft_run_expected_gen(const struct soft_vm *vm, const struct soft_vcpu *v, uint64_t off)
{
	uint64_t m, o, d;

	if (vm->base.wl.kind != VMM_WL_BALLOON || v->phase == 0)
		return (int64_t)(off < v->cursor ? v->gen : v->gen - 1);
	if (off < v->keep_pages)
		return (int64_t)(off < v->cursor ? v->gen : v->gen - 1);
	m = freed_pages(v);
	o = off - v->keep_pages;
	d = o < v->churn ? v->churn - o : v->churn + m - o;
	if (d < 1 || d > window_of(vm, v))
		return -1;	/* free */
	return (int64_t)(o < v->churn ? v->churn_gen : v->churn_gen - 1);
}

void soft_run_hint_duty(struct soft_vcpu *v)
{
	struct soft_vm *vm = v->vm;
	uint64_t req = atomic_load_explicit(&vm->hint_req, memory_order_acquire);

	if (req == v->hints_done)
		return;
	if (vm->base.wl.kind == VMM_WL_BALLOON)
		hint_all_free(vm, v);
	v->hints_done = req;
	pthread_mutex_lock(&vm->base.lock);
	vm->hint_acks++;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->base.lock);
}

#define HINTS_START_WAIT_NS 1000000000ull

/*
 * The engine takes hints from now on: every vCPU reports its own free pages
 * at its next checkpoint (never a page it is writing meanwhile), and round
 * 0 waits for that (at most a second) from the vCPUs that are running.
 */
void soft_run_hints_start(struct soft_vm *vm, struct gw_session *s)
{
	uint64_t end = gw_now_ns() + HINTS_START_WAIT_NS;
	struct timespec ts = { .tv_sec = (time_t)(end / 1000000000ull), .tv_nsec = (long)(end % 1000000000ull) };

	pthread_mutex_lock(&vm->hint_lock);
	vm->hint_session = s;
	pthread_mutex_unlock(&vm->hint_lock);
	if (vm->base.wl.kind != VMM_WL_BALLOON)
		return;
	pthread_mutex_lock(&vm->base.lock);
	vm->hint_acks = 0;
	atomic_fetch_add(&vm->hint_req, 1);
	/* A parked vCPU answers when it runs again: late hints are still right. */
	while (vm->hint_acks + vm->nr_parked < vm->nr_threads &&
	       pthread_cond_timedwait(&vm->cond, &vm->base.lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&vm->base.lock);
	gw_log(GW_LOG_INFO, "soft", "hints_reported", "vcpus=%u", vm->hint_acks);
}

void soft_run_hints_stop(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->hint_lock);
	vm->hint_session = NULL;
	pthread_mutex_unlock(&vm->hint_lock);
}

/* dirty, verify and balloon: batches of page writes at the workload's rate. */
static void run_writer(struct soft_vcpu *v)
{
	const struct vmm_workload *wl = &v->vm->base.wl;
	struct pacer pc;
	bool slept;

	pacer_init(&pc, v, wl->rate_pps);
	while (!soft_vcpu_checkpoint(v, &slept)) {
		if (!v->nr_pages) {
			soft_vcpu_sleep(v, IDLE_TICK_NS);
			continue;
		}
		for (unsigned i = 0; i < pc.batch_pages; i++) {
			if (wl->kind == VMM_WL_VERIFY)
				write_verify(v);
			else if (wl->kind == VMM_WL_BALLOON)
				write_balloon(v, i);
			else
				write_dirty(v, wl->pattern_page);
		}
		atomic_fetch_add_explicit(&v->progress, pc.batch_pages, memory_order_relaxed);
		soft_vcpu_dirtied(v, pc.batch_pages);
		if (wl->kind == VMM_WL_BALLOON && v->phase == 0)
			pacer_restart(&pc);	/* the fill runs at full speed; the rate starts after it */
		else
			pacer_wait(v, &pc, slept, pc.batch_pages);
	}
}

void *soft_run_vcpu(void *vcpu)
{
	struct soft_vcpu *v = vcpu;

	atomic_store(&v->tid, (int)syscall(SYS_gettid));
	if (vmm_workload_needs_nic(&v->vm->base.wl))
		v->index == 0 ? soft_net_run(v) : run_idle(v, false);
	else if (v->vm->base.wl.kind == VMM_WL_IDLE)
		run_idle(v, true);
	else
		run_writer(v);
	atomic_store(&v->tid, 0);
	return NULL;
}
