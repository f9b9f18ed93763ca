/* SPDX-License-Identifier: MIT */
/*
 * What every VM of the reference VMM is, whatever its backend: struct
 * vmm_vm, embedded first in the backend's VM (struct kvm_vm, struct
 * soft_vm), so that a struct vmm * (vmm.h) and the engine's opaque are its
 * address. The base owns what the backends used to write twice:
 *
 *   - the lifecycle state machine behind the engine's pause, resume,
 *     save_state and load_state, run under ctl:
 *       running  --pause-->  paused  --resume-->  running
 *       created, incoming  --resume-->  running (first start)
 *       postmigrate  --resume-->  -EPERM;  shutdown  --resume-->  -ESHUTDOWN
 *   - the one gw_vm_ops table (vmm_vm_engine_ops, vm_ops.c), and the
 *     vmm_backend entries that are the same for every VM (vmm_vm_start,
 *     vmm_vm_check, ...);
 *   - the destination's post-migration check: after the first resume
 *     following a migration, a checkable workload's pages are checked on a
 *     thread of its own (guest work after the resume, not downtime), then
 *     the vCPUs start; under postcopy the check waits for every page
 *     (postcopy_ram(true)) and runs with the vCPUs paused. The guest does
 *     not run until it is done, so the dirty workload (what the demo and
 *     the benchmarks measure) checks then only when the RAM arrived shared
 *     (ram_shared: a local migration, where no digest verifies it); else
 *     the engine's RAM digest verifies and its check runs on request
 *     (vmm_vm_check) without delaying the guest after its resume;
 *   - the throttles (atomic stores the vCPU threads read at their pace
 *     calls) and the RAM release (every block unmapped and closed).
 *
 * What differs (how vCPUs stop and start, what a state section or a check
 * is, how RAM is set up) is the backend's struct vmm_vm_hooks.
 *
 * Threads: ctl serialises every control operation (start, destroy, the
 * engine callbacks, check, set_postmigrate) on any thread; the hooks run
 * with ctl held unless said otherwise. The post-check thread never takes
 * ctl; every ctl holder joins it (vmm_vm_join_post_check) before it touches
 * the vCPUs.
 */
#ifndef GW_VMM_VM_BASE_H
#define GW_VMM_VM_BASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <godwit/vm.h>
#include "dev/announce.h"
#include "dev/mmio_bus.h"
#include "dev/virtq.h"
#include "vmm.h"
#include "workload.h"

#define VMM_MSG_MAX 256

/*
 * Devices: device i's 4 KiB register page is at dev_base_gpa + i * 4 KiB,
 * its line dev_gsi_base + i (the backend's fixed layout, the same on every
 * host: the guest found its devices there before a migration).
 */
#define VMM_DEV_WINDOW_BYTES 4096u

struct vmm_vm;
struct gw_session;

/* What a backend does its own way. @vm is the base of the backend's VM. */
struct vmm_vm_hooks {
	const char *name;		/* "soft", "KVM": in reasons */
	const char *subsys;		/* "soft", "kvm": the log subsystem */
	/* State running: every vCPU stopped (its last guest work done) on return. */
	void (*pause_vcpus)(struct vmm_vm *vm);
	void (*resume_vcpus)(struct vmm_vm *vm);	/* state paused */
	/*
	 * A thread per vCPU, running: the first start (ctl held), or after the
	 * post-migration check on its thread (no ctl, but every ctl holder joins
	 * that thread first). 0 or -errno.
	 */
	int (*start_vcpus)(struct vmm_vm *vm);
	/* End and join every vCPU thread (destroy). */
	void (*stop_vcpus)(struct vmm_vm *vm);
	/* Not running: add the VM's sections. 0 or -errno. */
	int (*save_state)(struct vmm_vm *vm, struct gw_state *st);
	/*
	 * Optional: why an incoming VM is not ready for a state or RAM (NULL:
	 * it is; else a note for the reason, "" for none). Also asked, for its
	 * note, when the VM is not incoming.
	 */
	const char *(*load_busy)(const struct vmm_vm *vm);
	/* Incoming and ready: check the sections, then apply them (loaded set by the base). */
	int (*load_state)(struct vmm_vm *vm, struct gw_state *st);
	/*
	 * Incoming and ready: RAM for the source's layout @want (gw_vm_ops.setup_ram),
	 * the workload laid out over it. Every fd in @want is the hook's: mapped
	 * or closed, also on failure. 0 or -errno with a reason.
	 */
	int (*setup_ram)(struct vmm_vm *vm, const struct gw_vm_info *want, char *reason,
			 size_t reason_len);
	/*
	 * Optional: whether the VM's RAM has an exact check (NULL:
	 * vmm_workload_checkable of wl). Fixed while vCPUs exist; ctl held or
	 * the post-check thread.
	 */
	bool (*checkable)(const struct vmm_vm *vm);
	/*
	 * vCPUs parked or absent: the workload's exact check (ctl held, or on
	 * the post-check thread). 0, -EIO (first bad page in @msg) or -errno.
	 */
	int (*check)(struct vmm_vm *vm, char *msg, size_t msg_len);
	/* Units of guest work since creation; any thread, never blocks (not even under postcopy). */
	uint64_t (*progress)(const struct vmm_vm *vm);
	/* The thread id vCPU @i runs on, 0 when none; lock-free (a fault handler asks). */
	pid_t (*vcpu_tid)(const struct vmm_vm *vm, unsigned i);
	/* Optional, both or neither: free-page hints for @s from now on (gw_vm_ops.hints_start), off. */
	void (*hints_start)(struct vmm_vm *vm, struct gw_session *s);
	void (*hints_stop)(struct vmm_vm *vm);
	/*
	 * Free the backend's VM (vCPUs stopped): its RAM with vmm_vm_ram_release,
	 * then what else it holds; vmm_vm_release is its last call before free().
	 */
	void (*free)(struct vmm_vm *vm);
};

struct vmm_vm {
	const struct vmm_vm_hooks *hooks;	/* creation, read-only */
	pthread_mutex_t ctl;		/* serialises control operations */
	atomic_int state;		/* enum vmm_state: written under ctl, read anywhere */

	/* ctl: RAM and workload, fixed while vCPU threads exist. */
	struct gw_vm_info info;		/* the RAM blocks (in blocks[]) and what a backend adds */
	struct gw_ram_block blocks[GW_MAX_RAM_BLOCKS];	/* info.blocks points here */
	uint64_t ram_pages;		/* RAM the workload may use, over every block it owns */
	struct vmm_workload wl;		/* replaced by a load (before vCPUs exist) */
	uint64_t ws_pages;		/* working set, from wl and RAM */
	unsigned nr_vcpus;		/* vCPUs that run the workload (a destination: as loaded) */
	bool loaded;			/* destination: a state was applied */
	/*
	 * Destination: the last setup_ram mapped the fds the source passed (a
	 * local migration: one copy of RAM, nothing for a digest to compare).
	 */
	bool ram_shared;
	/* Canonical workload spec: written under ctl and lock, read under either. */
	char spec[VMM_WORKLOAD_SPEC_MAX];

	/*
	 * Destination, postcopy: set by postcopy_ram(false) just before the
	 * resume, cleared by postcopy_ram(true) once every page is there. While
	 * set RAM is read only through its mappings (a fault waits for its
	 * page) and the exact check waits for the end. Any thread reads it.
	 */
	atomic_bool postcopy_incomplete;

	/* The post-migration check thread: ctl. */
	pthread_t post_thread;
	bool post_thread_started;

	/*
	 * lock: the post-migration check's result and the spec's writers
	 * (below); the backends add what their vCPU threads share with a
	 * controller (soft: the pause handshake; KVM: the guest report).
	 */
	pthread_mutex_t lock;
	int post_check;			/* lock: 1 ok, 0 not run, -1 failed */
	char post_msg[VMM_MSG_MAX];	/* lock: what it found */

	/* The engine's brakes: any thread stores, vCPU threads read at their pace calls. */
	atomic_uint throttle_pct;	/* auto-converge: vCPUs sleep this % of each 10 ms slice */
	atomic_uint_least64_t dirty_limit_bps;	/* per vCPU, 0 = off */

	/*
	 * Devices (docs/devices.md, "The VMs' devices"). Made at creation
	 * (vmm_vm_devices_create), before any vCPU runs: the bus, the layout,
	 * the irq ops and the NIC list are read-only from then on (the bus is
	 * read without a lock). dev_mem is rewritten by ctl holders when the
	 * RAM changes (a destination's setup_ram), while no device runs.
	 */
	struct vmm_mmio_bus mmio;	/* every device's register page */
	uint64_t dev_base_gpa;		/* the backend's: first device window */
	uint32_t dev_gsi_base;		/* the backend's: first device's line */
	const struct virtio_irq_ops *dev_irq;	/* the backend's lines (KVM_IRQ_LINE, irq_lines) */
	void *dev_irq_opaque;
	struct virtq_mem dev_mem;	/* guest RAM as devices see it, mark_dirty below */
	struct virtio_net *nics[VMM_MAX_NICS];
	unsigned nr_nics;
	/* dev_started: ctl. The NICs' I/O threads run (or are stopped by a pause, to resume). */
	bool dev_started;
	/*
	 * The source session device writes are reported to
	 * (gw_session_mark_dirty), set by whoever makes and frees source
	 * sessions (vmm_vm_set_session). sess_lock guards it: the devices' I/O
	 * threads hold it around each report, so that after set_session
	 * returns no report reaches the old session, which may then be freed.
	 */
	pthread_mutex_t sess_lock;
	struct gw_session *sess;	/* sess_lock; NULL: nobody migrates, reports dropped */
	/* The NICs' announcers (vm_announce.c): announce_lock guards the three below. */
	pthread_mutex_t announce_lock;
	struct vmm_announce *announce;	/* after an incoming migration's resume; NULL until one */
	struct vmm_announce *announce_qmp;	/* QMP's announce-self; NULL until asked */
	struct vmm_announce_params announce_params;	/* QEMU's announce-* (defaults at init) */
};

/*
 * Creation, RAM in place, dev_base_gpa, dev_gsi_base and dev_irq set: one
 * virtio-net per @cfg->nics (backend opened: a destination opens its own
 * tap), registered on mmio. 0 or -errno with a reason; nothing left on
 * failure.
 */
int vmm_vm_devices_create(struct vmm_vm *vm, const struct vmm_config *cfg, char *err,
			  size_t err_len);
/* Every device destroyed (I/O threads joined, backends closed); idempotent. */
void vmm_vm_devices_destroy(struct vmm_vm *vm);
/* ctl held (or creation), no device running: dev_mem from info.blocks again. 0 or -errno. */
int vmm_vm_dev_mem_refresh(struct vmm_vm *vm);

/* Creation: the base of a zeroed VM (mutexes, no RAM, state created). */
void vmm_vm_init(struct vmm_vm *vm, const struct vmm_vm_hooks *hooks);
/* The hooks' free, last: the base's mutexes (RAM released already). */
void vmm_vm_release(struct vmm_vm *vm);
/*
 * ctl held (or creation), a block free in info.blocks: append block @name
 * at @gpa, mapped at @host, @size_bytes of GW_PAGE_BYTES pages from @fd at
 * @fd_offset_bytes (the VM's from now on: vmm_vm_ram_release closes it).
 * Returns the block, for what the backend adds (a KVM memslot).
 */
struct gw_ram_block *vmm_vm_ram_block_add(struct vmm_vm *vm, const char *name, uint64_t gpa,
					  void *host, uint64_t size_bytes, int fd,
					  uint64_t fd_offset_bytes);
/* Unmap and close every RAM block (info.blocks), ram_pages 0. */
void vmm_vm_ram_release(struct vmm_vm *vm);
/* Close the fds a refused gw_vm_ops.setup_ram received in @want. */
void vmm_vm_close_received(const struct gw_vm_info *want);
/*
 * A destination made with --memory whose guest RAM (@here_bytes) is not the
 * source's (@src_bytes): the refusal in @reason, sizes as --memory takes them.
 */
void vmm_memory_mismatch(char *reason, size_t reason_len, uint64_t src_bytes, uint64_t here_bytes);
/* --memory @bytes that a backend cannot make (not pages of @page_bytes, or over @max_bytes): @err. */
void vmm_memory_refused(char *err, size_t err_len, uint64_t bytes, unsigned page_bytes, uint64_t max_bytes);

static inline enum vmm_state vmm_vm_state(const struct vmm_vm *vm)
{
	return (enum vmm_state)atomic_load(&((struct vmm_vm *)vm)->state);
}

/* ctl held (or creation). */
static inline void vmm_vm_set_state(struct vmm_vm *vm, enum vmm_state st)
{
	atomic_store(&vm->state, (int)st);
}

/* ctl held: whether the workload has an exact check (the checkable hook, or the workload's kind). */
bool vmm_vm_checkable(const struct vmm_vm *vm);

/*
 * ctl held: whether the first resume after a migration (or postcopy_ram(true))
 * runs the check: a checkable workload, dirty only with ram_shared.
 */
bool vmm_vm_check_at_resume(const struct vmm_vm *vm);

/* ctl held: wait for a pending post-migration check and the vCPU start after it. */
void vmm_vm_join_post_check(struct vmm_vm *vm);

/* The engine's callbacks of every VM (opaque = its struct vmm_vm *), without free-page hints. */
extern const struct gw_vm_ops vmm_vm_engine_ops;
/* The same callbacks with hints_start and hints_stop (backends with those hooks). */
extern const struct gw_vm_ops vmm_vm_engine_ops_hints;

/* vmm_backend entries, the same for every backend (vmm.h says what each does). */
#define VMM_VM_BACKEND_ENTRIES						\
	.destroy = vmm_vm_destroy,					\
	.start = vmm_vm_start,						\
	.info = vmm_vm_info,						\
	.state = vmm_vm_backend_state,					\
	.set_postmigrate = vmm_vm_set_postmigrate,			\
	.progress = vmm_vm_progress,					\
	.workload = vmm_vm_workload,					\
	.check = vmm_vm_check,						\
	.post_migration_check = vmm_vm_post_migration_check,		\
	.set_session = vmm_vm_set_session,				\
	.mmio_bus = vmm_vm_mmio_bus,					\
	.nic = vmm_vm_nic

void vmm_vm_destroy(struct vmm *v);
int vmm_vm_start(struct vmm *v);
const struct gw_vm_info *vmm_vm_info(const struct vmm *v);
enum vmm_state vmm_vm_backend_state(const struct vmm *v);
void vmm_vm_set_postmigrate(struct vmm *v);
uint64_t vmm_vm_progress(const struct vmm *v);
void vmm_vm_workload(const struct vmm *v, char *buf, size_t len);
int vmm_vm_check(struct vmm *v, char *msg, size_t msg_len);
int vmm_vm_post_migration_check(const struct vmm *v, char *msg, size_t msg_len);
void vmm_vm_set_session(struct vmm *v, struct gw_session *s);
const struct vmm_mmio_bus *vmm_vm_mmio_bus(const struct vmm *v);
struct virtio_net *vmm_vm_nic(struct vmm *v, unsigned i);

/*
 * vm_announce.c: the announcers' state set up at init; the post-switchover
 * announcer and its idle thread made with the NICs (prepare); after an
 * incoming migration's resume, every NIC announced on that thread (the
 * resume only wakes it); stopped before the NICs at a pause; freed before
 * the NICs.
 */
void vmm_vm_announce_init(struct vmm_vm *vm);
void vmm_vm_announce_prepare(struct vmm_vm *vm);
void vmm_vm_announce_after_incoming(struct vmm_vm *vm);
void vmm_vm_announce_stop(struct vmm_vm *vm);
void vmm_vm_announce_release(struct vmm_vm *vm);

/* ctl held, vCPUs stopped: quiesce every running NIC. 0, or the first -errno (none left stopped). */
int vmm_vm_devices_stop(struct vmm_vm *vm);
/* ctl held: the NICs of a paused VM carry on (a failed migration). */
void vmm_vm_devices_resume(struct vmm_vm *vm);
/* ctl held: start the NICs (first start, or a destination's resume). 0 or -errno. */
int vmm_vm_devices_start(struct vmm_vm *vm);

/* vm_ops.c's view of the lifecycle (ctl taken inside each). */
int vmm_vm_pause(struct vmm_vm *vm);
int vmm_vm_resume(struct vmm_vm *vm);
/* ctl held, every page here, vCPUs parked or absent: the check, its result recorded. */
int vmm_vm_post_check_run(struct vmm_vm *vm);

#endif
