/* SPDX-License-Identifier: MIT */
/*
 * The soft backend from the inside: the struct every file of vmm/soft/
 * works on, who owns which field, and what each file offers the others.
 *
 * Files, each one concern; calls only go down this list, never back up:
 *   hooks.c  the base's hooks (vm_base.h: the lifecycle, the engine's
 *            callbacks and the post-migration check are the base's) and
 *            the vmm_backend entry
 *   vm.c     creation and release
 *   state.c  the "soft-vcpus" state section, save and load
 *   check.c  the workload check (dirty, verify, balloon)
 *   run.c    what each workload does on a vCPU; slices of the working set
 *   net.c    l2fwd and echo: the guest's NIC driver (common/vnet_drv.h) on vCPU 0
 *   vcpu.c   vCPU threads: start, park/pause/resume handshake, throttle
 *   ram.c    memfd (or file) RAM, prealloc, the destination's setup_ram
 *   probe.c  whether this host offers what the engine needs for soft RAM
 *
 * RAM is addressed by a global page index: block 0's pages first, then
 * block 1's, ... (VMM_PAGE_BYTES everywhere). A workload works on the
 * pages [0, ws_pages); vCPU i owns the contiguous slice
 * [i * ws_pages / n, (i + 1) * ws_pages / n) (vmm/workload.h).
 */
#ifndef GW_SOFT_INTERNAL_H
#define GW_SOFT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/session.h>
#include <godwit/vm.h>
#include "content.h"
#include "dirty_bucket.h"
#include "dev/irq_lines.h"
#include "vm_base.h"
#include "vmm.h"
#include "workload.h"

#define SOFT_PAGE_BYTES VMM_PAGE_BYTES
#define SOFT_MAX_VCPUS 64
#define SOFT_MSG_MAX VMM_MSG_MAX
#define SOFT_CHECK_EVERY_PAGES 64	/* writers look at the pause flag this often */
#define SOFT_MAX_RAM_BYTES (1ull << 40)	/* refuse absurd layouts */
/*
 * Devices: register pages from 1 TiB (above any RAM a soft VM may have,
 * whatever a destination's layout), lines from 0 of its irq_lines.
 */
#define SOFT_DEV_BASE_GPA SOFT_MAX_RAM_BYTES
#define SOFT_DEV_GSI_BASE 0u

struct soft_vm;

/*
 * One soft vCPU. Slice and cursor fields are owned by the vCPU thread while
 * it runs and by the control thread (under soft_vm.base.ctl) while the
 * vCPU is parked or not started; the park handshake orders the two.
 */
struct soft_vcpu {
	struct soft_vm *vm;		/* set at creation */
	unsigned index;			/* set at creation */
	pthread_t thread;		/* valid when thread_started */
	bool thread_started;		/* control thread only */
	uint64_t first_page;		/* slice: global page index */
	uint64_t nr_pages;		/* slice length, may be 0 */
	uint64_t cursor;		/* next page to write, offset in slice (balloon phase 1:
					   in the kept part), < nr_pages */
	uint64_t gen;			/* verify, balloon: generation being written, >= 1 */
	/* balloon (run.c): phase 0 fills the slice like verify; phase 1 keeps
	 * [0, keep_pages) in use (cursor, gen) and walks the rest with a window
	 * of pages in use (churn, churn_gen), the others free. */
	unsigned phase;
	uint64_t keep_pages;		/* set by soft_run_layout */
	uint64_t churn;			/* next page to reallocate, offset in the freed part */
	uint64_t churn_gen;		/* >= 2 in phase 1 */
	atomic_uint_fast64_t progress;	/* units of work done, monotonic */
	atomic_int tid;			/* the thread's id while it runs, 0 otherwise (postcopy blocktime) */

	/* vCPU thread only. */
	uint64_t slice_start_ns;	/* throttle: start of the current 10 ms slice, 0 = none */
	struct vmm_dirty_bucket bucket;	/* dirty limit (dirty_bucket.h) */
	uint64_t hints_done;		/* balloon: last hint request (hint_req) answered */
};

/*
 * The VM: the base (vm_base.h: ctl, state, RAM info, workload, vCPU count,
 * post-migration check, throttles, each field's owner said there) first,
 * then what only the soft VM has. A struct vmm * (vmm.h) of this backend
 * is its address.
 *
 * Threads: control operations (start, engine callbacks, check,
 * set_postmigrate, destroy) are serialised by base.ctl and run on any
 * thread; vCPU threads touch only their struct soft_vcpu, the RAM through
 * its mapping, and the handshake fields under base.lock; the post-check
 * thread (vm_base.c) runs while its starter holds no ctl and is joined by
 * every ctl holder before it touches the vCPUs.
 */
struct soft_vm {
	struct vmm_vm base;

	/* Configuration: set at creation, read-only. */
	enum vmm_fill fill;		/* initial content of a new VM (none on a destination) */
	uint64_t seed;
	char *memory_file;		/* NULL: memfd */
	bool prealloc;			/* touch all fresh RAM when it is created */

	/* RAM (ram.c): written under ctl before vCPU threads exist, then read-only. */
	uint64_t block_first_page[GW_MAX_RAM_BLOCKS + 1];	/* global index of each block */
	/* What never-rewritten pages hold (verify generation 0): ctl, like RAM. */
	enum vmm_fill init_fill;
	uint64_t init_seed;
	bool init_known;		/* false: RAM came from a pre-existing file */

	/* Workload (run.c): slices of base.wl over base.ws_pages, laid out before vCPUs exist. */
	struct soft_vcpu vcpus[SOFT_MAX_VCPUS];

	/* The pause handshake (vcpu.c), under base.lock. */
	pthread_cond_t cond;		/* with base.lock: a vCPU parked, or pause/stop changed */
	atomic_bool pause_req;		/* written under base.lock */
	atomic_bool stop_req;		/* written under base.lock */
	unsigned nr_threads;		/* base.lock: vCPU threads started */
	unsigned nr_parked;		/* base.lock: vCPU threads parked */

	/* Free-page hints (balloon): the session taking them, between the
	 * engine's hints_start and hints_stop. */
	pthread_mutex_t hint_lock;	/* guards hint_session: no hint after hints_stop returns */
	struct gw_session *hint_session;	/* hint_lock */
	atomic_uint_fast64_t hint_req;	/* bumped by hints_start: vCPUs report their free pages */
	unsigned hint_acks;		/* base.lock: vCPUs that answered the current request */

	/* The devices' interrupt lines (irq_lines.h: its own lock); a guest driver waits on them. */
	struct vmm_irq_lines irq;
};

/* The soft VM whose base is @b (the base is its first member). */
static inline struct soft_vm *soft_of(struct vmm_vm *b)
{
	return (struct soft_vm *)b;
}

static inline const struct soft_vm *soft_of_const(const struct vmm_vm *b)
{
	return (const struct soft_vm *)b;
}

/* ---- ram.c ---- */

/* Index of the block holding global page @page. */
unsigned soft_block_of(const struct soft_vm *vm, uint64_t page);
/* Host address of global page @page. */
uint8_t *soft_page_ptr(const struct soft_vm *vm, uint64_t page);
/*
 * Map one more block. @fd >= 0: map that fd (received, now ours, also on
 * failure). Otherwise the memory file (first block) or a new memfd.
 * *@fresh: the block reads as zeros. 0 or -errno with a reason in @err.
 */
int soft_ram_add(struct soft_vm *vm, const char *name, uint64_t gpa, uint64_t size_bytes,
		 int fd, uint64_t fd_offset_bytes, bool *fresh, char *err, size_t err_len);
/*
 * Destination, ctl held: RAM for the source's layout @want (see
 * gw_vm_ops.setup_ram): check it, then create it, or compare it with the
 * RAM given at creation and map received fds instead. Every fd in @want is
 * ours: mapped or closed, also on failure. 0 or -errno with a reason.
 */
int soft_ram_setup(struct soft_vm *vm, const struct gw_vm_info *want, char *reason,
		   size_t reason_len);

/* ---- vcpu.c ---- */

/*
 * vCPU threads call this between batches of work: parks while a pause is
 * requested, applies the throttle, answers a hint request; *slept tells
 * whether it slept in a pause or a throttle (timing bases restart: the
 * time is not owed back, or a paced workload would catch up on its
 * throttle). True when the thread must exit.
 */
bool soft_vcpu_checkpoint(struct soft_vcpu *v, bool *slept);
/* Sleep @ns, cut short by a pause or stop request. True when it was cut short. */
bool soft_vcpu_sleep(struct soft_vcpu *v, uint64_t ns);
/* @pages were just dirtied: take their tokens, sleeping under a dirty limit. */
void soft_vcpu_dirtied(struct soft_vcpu *v, unsigned pages);
/* ctl held, no threads yet: one thread per vCPU running @body(vcpu). 0 or -errno. */
int soft_vcpus_start(struct soft_vm *vm, void *(*body)(void *vcpu));
/* ctl held: returns once every vCPU thread is parked. */
void soft_vcpus_pause(struct soft_vm *vm);
void soft_vcpus_resume(struct soft_vm *vm);
/* ctl held: ends and joins every vCPU thread. */
void soft_vcpus_stop(struct soft_vm *vm);

/* ---- run.c ---- */

/* vCPU @i's share of a working set of @ws_pages pages under workload @wl. */
struct soft_slice {
	uint64_t first_page, nr_pages;	/* global page index, length */
	uint64_t keep_pages;		/* balloon: pages kept in use, at its start; else 0 */
};
void soft_run_slice(const struct vmm_workload *wl, uint64_t ws_pages, unsigned nr_vcpus,
		    unsigned i, struct soft_slice *out);
/* vCPU thread body: the VM's workload on this vCPU's slice. */
void *soft_run_vcpu(void *vcpu);
/* Slices for the current workload, RAM and nr_vcpus; cursors reset; spec made canonical. */
void soft_run_layout(struct soft_vm *vm);
/*
 * What page @off of @v's slice holds by the workload's invariant: its
 * generation (0: the initial fill content), or -1 when its content does
 * not matter (a balloon page that is free).
 */
int64_t soft_run_expected_gen(const struct soft_vm *vm, const struct soft_vcpu *v, uint64_t off);
/* Checkpoint duty: answer a pending free-page hint request (balloon). */
void soft_run_hint_duty(struct soft_vcpu *v);
/* Free-page hints: start taking them for @s (reports the free pages first), stop. */
void soft_run_hints_start(struct soft_vm *vm, struct gw_session *s);
void soft_run_hints_stop(struct soft_vm *vm);

/* ---- net.c ---- */

/*
 * The driver's area of NIC @i (VNET_DRV_AREA_BYTES) sits at the tail of
 * the last RAM block, NIC 0 lowest: guest RAM that migrates, outside every
 * working set (l2fwd and echo have none).
 */
uint64_t soft_net_area_gpa(const struct soft_vm *vm, unsigned i);
/* RAM large enough for the areas of the VM's NICs: 0 or -EINVAL with a reason. */
int soft_net_check(const struct soft_vm *vm, char *reason, size_t reason_len);
/* vCPU 0's body under l2fwd and echo (returns when the vCPU must exit). */
void soft_net_run(struct soft_vcpu *v);

/* ---- check.c ---- */

/* vCPUs parked or absent: the workload check. 0, -EIO (first bad page in @msg) or -errno. */
int soft_check_verify(const struct soft_vm *vm, char *msg, size_t msg_len);

/* ---- state.c ---- */

/* ctl held, vCPUs parked: add the "soft-vcpus" section. 0 or -errno. */
int soft_state_save(const struct soft_vm *vm, struct gw_state *st);
/* ctl held, incoming: check every field of the section, then apply it. 0 or gw_state_reject's. */
int soft_state_load(struct soft_vm *vm, struct gw_state *st);

/* ---- vm.c ---- */

/* vmm_soft.check: the configuration a VM can be made of; 0 or -EINVAL with a reason. */
int soft_config_check(const struct vmm_config *cfg, char *err, size_t err_len);
struct soft_vm *soft_vm_create(const struct vmm_config *cfg, char *err, size_t err_len);
/* Free everything of @vm (vCPUs stopped): RAM, the memory file's name, locks. */
void soft_vm_free(struct soft_vm *vm);
/* Units of work over every vCPU (atomics: any thread). */
uint64_t soft_vm_progress(const struct soft_vm *vm);

/* ---- hooks.c ---- */

/* The base's hooks (vm_base.h) for a soft VM. */
extern const struct vmm_vm_hooks soft_hooks;

/* ---- probe.c ---- */

/* 0 when the engine can track soft RAM on this host, else -errno and why. */
int soft_probe(char *why, size_t why_len);

#endif
