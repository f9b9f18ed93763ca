/* SPDX-License-Identifier: MIT */
/*
 * The reference VMM as the command line sees it: one interface, several
 * backends (KVM, soft), chosen with --accel from an explicit table in
 * preference order. A backend owns its VM: RAM, vCPUs (threads), workload,
 * state sections; it hands the engine a struct gw_vm_info and the
 * gw_vm_ops callbacks (opaque = its struct vmm *). Every backend's VM
 * embeds struct vmm_vm (vm_base.h) first: the lifecycle, the gw_vm_ops
 * table and most vmm_backend entries are written once there.
 *
 * vmm/ sees only the public API of libgodwit (include/godwit/), common/
 * (what it shares with the guests) and its own headers: whatever a VMM
 * needs from the engine is public API.
 *
 * Lifecycle, the same for every backend:
 *   created --start--> running <--pause/resume (engine)--> paused
 *   paused --set_postmigrate--> postmigrate (never runs again)
 *   incoming --setup_ram, load_state, resume (engine)--> running
 *   any --destroy--> gone
 *
 * Threads: create/destroy on the owning thread; every other operation may
 * be called from any thread (the VM's ctl serialises them, vm_base.h).
 */
#ifndef GW_VMM_H
#define GW_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/params.h>
#include <godwit/vm.h>
#include "workload.h"	/* VMM_WORKLOAD_SPEC_MAX */

/* Initial RAM content prepared on the host (fast, whatever the backend). */
enum vmm_fill {
	VMM_FILL_NONE = 0,	/* never touched: RAM stays a hole */
	VMM_FILL_ZERO,		/* every page written with zeros (populated) */
	VMM_FILL_MIX,		/* 25% zero, 25% incompressible, 50% text-like */
	VMM_FILL_RANDOM,	/* incompressible */
	VMM_FILL_TEXT,		/* text-like, compresses ~3-4x */
};

enum vmm_state {
	VMM_CREATED = 0,	/* RAM exists, vCPUs not started */
	VMM_INCOMING,		/* destination waiting for a migration */
	VMM_RUNNING,
	VMM_PAUSED,
	VMM_POSTMIGRATE,	/* source after a completed migration: never runs again */
	VMM_SHUTDOWN,
};
const char *vmm_state_name(enum vmm_state st);	/* "running", "paused", ... */

struct vmm_config {
	uint64_t memory_bytes;		/* 0 on a destination = take the source's layout */
	unsigned nr_vcpus;		/* 1..64 */
	const char *memory_file;	/* map RAM from this file (NULL: memfd) */
	enum vmm_fill fill;
	uint64_t seed;			/* fill and workload content */
	const char *workload;		/* "idle", "dirty:ws=SIZE,pattern=page|byte,rate=N",
					   "verify[:ws=SIZE,rate=N]",
					   "balloon[:ws=SIZE,keep=SIZE,window=PAGES,rate=N]"; NULL = idle */
	bool incoming;			/* destination: no vCPUs until migrated */
	bool prealloc;			/* allocate and zero all RAM at creation */
	/*
	 * Dirty tracking the VM must be ready for (GW_DIRTY_AUTO = the
	 * backend's choice). KVM enables its dirty ring at creation, and a VM
	 * with a ring has no dirty bitmap: kvm-log needs GW_DIRTY_KVM_LOG here.
	 */
	enum gw_dirty_backend_id dirty_backend;
	/*
	 * virtio-net devices, NIC i at the backend's device window i
	 * (docs/devices.md). A destination has as many as its source (a load
	 * refuses a different count) and opens its own taps.
	 */
	const struct virtio_net_nic *nics;
	unsigned nr_nics;		/* 0..VMM_MAX_NICS (vm_base.h) */
	/* Tests: NIC i over descriptor nic_fds[i] (net_backend_fd, taken over), not its tap. */
	const int *nic_fds;
};

#define VMM_MAX_NICS 4u		/* virtio-net devices per VM (--nic) */

struct vmm;				/* one VM of one backend */
struct virtio_net_nic;			/* dev/virtio_net.h: one --nic */
struct virtio_net;
struct vmm_mmio_bus;
struct gw_session;

struct vmm_backend {
	const char *name;		/* "kvm", "soft": the --accel value */
	/* 0 when usable on this host, else -errno and why in @why. */
	int (*probe)(char *why, size_t why_len);
	/*
	 * Whether this backend can make a VM of @cfg (vCPUs, size, fill,
	 * workload): 0, or -EINVAL / -EOPNOTSUPP and why in @why. Nothing is
	 * made: a command line is checked whole before anything is allocated.
	 * create() refuses what this refuses, with the same reason.
	 */
	int (*check_config)(const struct vmm_config *cfg, char *why, size_t why_len);
	/* The VM (RAM mapped and filled, workload set, vCPUs not running). NULL, errno, reason. */
	struct vmm *(*create)(const struct vmm_config *cfg, char *err, size_t err_len);
	void (*destroy)(struct vmm *vm);	/* NULL is fine */
	/* Start the vCPUs (a new VM). 0 or -errno. */
	int (*start)(struct vmm *vm);
	/* The RAM blocks etc. as the engine wants them (valid while the VM lives). */
	const struct gw_vm_info *(*info)(const struct vmm *vm);
	/* The engine callbacks; their opaque is the struct vmm *. */
	const struct gw_vm_ops *engine_ops;
	enum vmm_state (*state)(const struct vmm *vm);
	/* The source's VM after a completed migration: never runs again. */
	void (*set_postmigrate)(struct vmm *vm);
	/* Units of guest work done since creation (monotonic, survives migration). */
	uint64_t (*progress)(const struct vmm *vm);
	/*
	 * The workload as it runs, canonical (e.g. "verify:ws=536870912,rate=5000"),
	 * copied into @buf: it changes when a migration brings the source's.
	 */
	void (*workload)(const struct vmm *vm, char *buf, size_t len);
	/*
	 * Check every page the workload owns against what it could have
	 * written (vCPUs paused meanwhile). 0 ok, -EIO mismatch (first bad
	 * page in @msg), -EOPNOTSUPP for workloads with no exact check.
	 */
	int (*check)(struct vmm *vm, char *msg, size_t msg_len);
	/* The check a destination runs by itself after resume: 1 ok, 0 not (yet) run, -1 failed. */
	int (*post_migration_check)(const struct vmm *vm, char *msg, size_t msg_len);
	/*
	 * The source session the VM's devices report their guest RAM writes
	 * to (gw_session_mark_dirty), NULL for none. Set it right after making
	 * a source session, and to another one or NULL before freeing it: once
	 * this returns no report reaches the previous one. Any thread.
	 */
	void (*set_session)(struct vmm *vm, struct gw_session *s);
	/* The MMIO bus of the VM's devices (what a soft guest's register accesses go to). */
	const struct vmm_mmio_bus *(*mmio_bus)(const struct vmm *vm);
	/* NIC @i, NULL beyond the last (tests, status). */
	struct virtio_net *(*nic)(struct vmm *vm, unsigned i);
};

/* The backends, one folder each (vmm/soft/, vmm/kvm/); only the built ones are in the table. */
extern const struct vmm_backend vmm_kvm;
extern const struct vmm_backend vmm_soft;

/* Backends in preference order (--accel auto takes the first that probes), NULL-terminated. */
extern const struct vmm_backend *const vmm_backends[];
/* The backend called @name, or NULL. */
const struct vmm_backend *vmm_backend_by_name(const char *name);

/* Fill names: none zero mix random text. 0 and *out set, or -EINVAL. */
int vmm_fill_parse(const char *name, enum vmm_fill *out);
const char *vmm_fill_name(enum vmm_fill f);
/*
 * Fill numbers in state sections are fixed (0 none, 1 zero, 2 mix,
 * 3 random, 4 text); the enum may change. from_wire: 0 and *out set, or
 * -EINVAL for a number it does not know.
 */
uint32_t vmm_fill_to_wire(enum vmm_fill f);
int vmm_fill_from_wire(uint32_t w, enum vmm_fill *out);

#endif
