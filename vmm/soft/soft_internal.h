/* SPDX-License-Identifier: MIT */
/*
 * Internals of the soft VM shared by soft_vm.c (RAM, lifecycle, state),
 * fill.c (initial RAM content) and workload.c (what the vCPUs do).
 *
 * RAM is addressed by a global page index: block 0's pages first, then
 * block 1's, ... (page size 4096 everywhere). A workload works on the
 * pages [0, ws_pages); vCPU i owns the contiguous slice
 * [i * ws_pages / n, (i + 1) * ws_pages / n).
 */
#ifndef GW_SOFT_INTERNAL_H
#define GW_SOFT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "soft/soft_vm.h"

#define SOFT_PAGE_BYTES 4096u
#define SOFT_MAX_VCPUS 64
#define SOFT_SPEC_MAX 128		/* canonical workload spec, with NUL */
#define SOFT_MSG_MAX 256
#define SOFT_CHECK_EVERY_PAGES 64	/* writers look at the pause flag this often */

/* ---- fill.c ---- */

/* Content of global page @page for @fill and @seed (4096 bytes). NONE = zeros. */
void soft_fill_page(enum soft_fill fill, uint64_t seed, uint64_t page, uint8_t *out);
/*
 * Fill all of @info's RAM with @nr_threads threads. @fresh: RAM is known to
 * be zero already (new memfd), so zero pages are only populated, not written.
 * 0 or -errno.
 */
int soft_fill_ram(const struct gw_vm_info *info, enum soft_fill fill, uint64_t seed,
		  bool fresh, unsigned nr_threads);

/* Small, fast, deterministic mixers shared by fill and workloads. */
static inline uint64_t soft_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* wyrand: 8 bytes per call, passes BigCrush, a single 64x64->128 multiply. */
static inline uint64_t soft_wyrand(uint64_t *s)
{
	__uint128_t t;

	*s += 0xa0761d6478bd642full;
	t = (__uint128_t)*s * (*s ^ 0xe7037ed1a0b428dbull);
	return (uint64_t)(t >> 64) ^ (uint64_t)t;
}

/* ---- workload.c ---- */

enum soft_workload_kind {
	SOFT_WL_IDLE = 0,
	SOFT_WL_DIRTY,
	SOFT_WL_VERIFY,
};

struct soft_workload {
	enum soft_workload_kind kind;
	bool ws_given;			/* ws= was in the spec */
	uint64_t ws_bytes;		/* as given (dirty default 256M; verify: all RAM) */
	bool pattern_page;		/* dirty: rewrite whole pages, else one word per page */
	uint64_t rate_pps;		/* dirty: pages per second over all vCPUs, 0 = full speed */
};

/* Parse "name[:key=value,...]" (NULL = idle). 0, or -EINVAL with a reason in @err. */
int soft_workload_parse(const char *spec, struct soft_workload *wl, char *err, size_t err_len);
/* Pages of the working set for @ram_pages of RAM. */
uint64_t soft_workload_ws_pages(const struct soft_workload *wl, uint64_t ram_pages);
/* Canonical spec with the effective working set, e.g. "verify:ws=67108864". */
void soft_workload_format(const struct soft_workload *wl, uint64_t ws_pages, char *buf,
			  size_t len);
/* Content of a verify page: (page index, generation) then a derived pattern. */
void soft_verify_page(uint64_t page, uint64_t gen, uint8_t *out);

struct soft_vm;

/*
 * One soft vCPU. Slice and cursor fields are owned by the vCPU thread while
 * it runs and by the control thread (under soft_vm.ctl) while the vCPU is
 * parked or not started; the park handshake orders the two.
 */
struct soft_vcpu {
	struct soft_vm *vm;		/* set at creation */
	unsigned index;			/* set at creation */
	pthread_t thread;		/* valid when thread_started */
	bool thread_started;		/* control thread only */
	uint64_t first_page;		/* slice: global page index */
	uint64_t nr_pages;		/* slice length, may be 0 */
	uint64_t cursor;		/* next page to write, offset in slice, < nr_pages */
	uint64_t gen;			/* verify: generation being written, >= 1 */
	atomic_uint_fast64_t progress;	/* units of work done, monotonic */
	uint64_t throttle_mark_ns;	/* vCPU thread: end of the last throttle sleep */
};

/* vCPU thread body (workload.c). */
void *soft_vcpu_main(void *arg);
/*
 * Checkpoint for vCPU threads: parks while a pause is requested, applies
 * the throttle; *was_parked tells whether it slept in a pause (timing
 * bases must restart). Returns true when the thread must exit.
 */
bool soft_vcpu_checkpoint(struct soft_vcpu *v, bool *was_parked);
/* Host address of global page @page. */
uint8_t *soft_page_ptr(const struct soft_vm *vm, uint64_t page);
/* The VM's workload (set before the vCPUs start). */
const struct soft_workload *soft_vm_wl(const struct soft_vm *vm);

#endif
