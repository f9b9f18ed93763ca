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
#include "content.h"
#include "fill.h"
#include "soft/soft_vm.h"
#include "workload.h"

#define SOFT_PAGE_BYTES VMM_PAGE_BYTES
#define SOFT_MAX_VCPUS 64
#define SOFT_MSG_MAX 256
#define SOFT_CHECK_EVERY_PAGES 64	/* writers look at the pause flag this often */

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
const struct vmm_workload *soft_vm_wl(const struct soft_vm *vm);

#endif
