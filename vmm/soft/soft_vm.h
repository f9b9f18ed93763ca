/* SPDX-License-Identifier: MIT */
/*
 * The soft backend: a "VM" made of memfd-backed RAM and worker threads
 * ("soft vCPUs") that run a workload at native speed. Used where /dev/kvm is
 * missing and by tests of the engine. Pause and resume stop and restart the
 * workers; workload state travels as the device state section "soft-vcpus".
 *
 * Threads: the creating thread owns the soft_vm; vCPU threads own their
 * workload cursor; pause/resume/status may be called from any thread.
 */
#ifndef GW_SOFT_VM_H
#define GW_SOFT_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/vm.h>
#include "vmm.h"


enum soft_vm_state {
	SOFT_VM_CREATED = 0,	/* RAM exists, vCPUs not started */
	SOFT_VM_INCOMING,	/* destination waiting for a migration */
	SOFT_VM_RUNNING,
	SOFT_VM_PAUSED,
	SOFT_VM_POSTMIGRATE,	/* source after a completed migration: never runs again */
	SOFT_VM_SHUTDOWN,
};
const char *soft_vm_state_name(enum soft_vm_state st);	/* "running", "paused", ... */

struct soft_vm_config {
	uint64_t memory_bytes;		/* 0 on a destination = take the source's layout */
	unsigned nr_vcpus;		/* 1..64 */
	const char *memory_file;	/* map RAM from this file (NULL: memfd) */
	enum vmm_fill fill;
	uint64_t seed;			/* fill and workload content */
	const char *workload;		/* "idle", "dirty:ws=256M,pattern=page,rate=N",
					   "verify[:ws=SIZE]"; NULL = idle */
	bool incoming;			/* destination: no vCPUs until migrated */
	bool prealloc;			/* allocate and zero all RAM at creation */
};

struct soft_vm;

/*
 * Create the VM: RAM (mapped, filled) and the workload, vCPUs not started.
 * NULL with errno and a reason in @err.
 */
struct soft_vm *soft_vm_new(const struct soft_vm_config *cfg, char *err, size_t err_len);
/* Stops the vCPUs, unmaps RAM. NULL is fine. */
void soft_vm_free(struct soft_vm *vm);

/* Start the vCPU threads (source, or after a migration's load_state). 0 or -errno. */
int soft_vm_start(struct soft_vm *vm);

/* The RAM blocks and count of vCPUs, as the engine wants them. */
const struct gw_vm_info *soft_vm_info(const struct soft_vm *vm);
/* The engine callbacks; their opaque is the struct soft_vm *. */
extern const struct gw_vm_ops soft_vm_ops;

enum soft_vm_state soft_vm_state(const struct soft_vm *vm);
/* The source VMM calls this once its migration completed (go sent, resumed). */
void soft_vm_set_postmigrate(struct soft_vm *vm);

/* Workload progress: units of work done by all vCPUs since creation (monotonic). */
uint64_t soft_vm_progress(const struct soft_vm *vm);
/* The workload spec as running (e.g. "dirty:ws=268435456,pattern=page,rate=0"). */
const char *soft_vm_workload(const struct soft_vm *vm);

/*
 * Verify: check every page the workload owns against what it could have
 * written (pausing the vCPUs during the check if they run). For the verify
 * workload this is exact (generation per page from cursor); for others it
 * returns -EOPNOTSUPP. 0 = all good, -EIO = mismatch (first bad page in @msg).
 */
int soft_vm_check(struct soft_vm *vm, char *msg, size_t msg_len);
/*
 * Result of the automatic check a destination runs on its first resume
 * after a migration: 1 ok, 0 not run (yet / not verify), -1 failed.
 */
int soft_vm_post_migration_check(const struct soft_vm *vm, char *msg, size_t msg_len);

#endif
