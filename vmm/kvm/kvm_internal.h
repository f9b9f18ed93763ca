/* SPDX-License-Identifier: MIT */
/*
 * Internals of the KVM backend, shared by its files:
 *   kvm_sys.c      /dev/kvm, capabilities, the VM fd, memory blocks and slots
 *   kvm_setup.c    guest image, boot structures, vCPU creation
 *   kvm_vcpu.c     vCPU threads: KVM_RUN loop, exits, serial, PV port, kicks
 *   kvm_state.c    save/load of vCPU and VM state (sections)
 *   kvm_check.c    progress and the workload check (verify, dirty)
 *   kvm_create.c   creation: config, allocation, RAM blocks and content
 *   kvm_hooks.c    the base's hooks (vm_base.h): vCPUs, state, RAM set-up
 *   kvm_backend.c  struct vmm_backend vmm_kvm: probe, creation, reports
 *
 * Ownership: `base.ctl` serializes every control operation (create, start,
 * pause, resume, save, load, check, destroy); fields marked "ctl" change
 * only under it. vCPU threads own their struct kvm_vcpu "thread" fields
 * while they run; the pause handshake (kvm_pause.h) orders their last
 * guest work before a controller's return from pause. Fields marked
 * "creation" are set before any vCPU thread exists and then read-only.
 */
#ifndef GW_KVM_INTERNAL_H
#define GW_KVM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/kvm.h>
#include <godwit/vm.h>
#include "guest_abi.h"
#include "kvm/kvm_compat.h"
#include "kvm/kvm_pause.h"
#include "kvm/kvm_vm.h"
#include "dev/mmio_bus.h"
#include "dirty_bucket.h"
#include "vm_base.h"
#include "workload.h"

#define KVM_MSG_MAX VMM_MSG_MAX
#define KVM_SERIAL_LINE_MAX 160
#define KVM_BLOCK_SYS 0u		/* info.blocks[] index and memslot */
#define KVM_BLOCK_RAM 1u
#define KVM_MAX_RAM_BYTES (1ull << 40)

/* What this host's KVM offers (probed once per VM). */
struct kvm_caps {
	uint32_t compat;		/* KVM_COMPAT_* present here */
	uint32_t xsave_bytes;		/* KVM_CAP_XSAVE2 size, or 4096 */
	uint32_t max_vcpus;
	uint32_t ring_max_bytes;	/* 0: no dirty ring */
	bool ring_acq_rel;
	uint32_t manual_protect;	/* KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2 flags */
	unsigned vcpu_mmap_bytes;
};

struct kvm_vm;

struct kvm_vcpu {
	struct kvm_vm *vm;		/* creation */
	unsigned index;			/* creation */
	int fd;				/* creation, -1 when not created */
	struct kvm_run *run;		/* creation: mmap of fd */
	void *ring;			/* creation: dirty ring mapping or NULL */
	pthread_t thread;		/* ctl */
	bool started;			/* ctl: thread exists (joined at stop) */
	atomic_bool alive;		/* thread running its loop (kicks go only there) */
	atomic_int tid;			/* the thread's id while it runs, 0 otherwise (postcopy blocktime) */
	/* vCPU thread while it runs: */
	char serial[KVM_SERIAL_LINE_MAX];
	unsigned serial_len;
	uint64_t pace_base_ns;		/* pacing: start of the current accounting period */
	uint64_t pace_pages;		/* pacing: pages since pace_base_ns */
	uint64_t slice_start_ns;	/* throttle: start of the current 10 ms slice, 0 = none */
	struct vmm_dirty_bucket bucket;	/* dirty limit (dirty_bucket.h) */
	bool hello_seen;
	unsigned warned_ports;		/* unexpected I/O reported (capped) */
};

/*
 * The KVM VM: the base (vm_base.h: ctl, state, RAM info, workload, vCPU
 * count, post-migration check, throttles, each field's owner said there)
 * first, then what only KVM has.
 */
struct kvm_vm {
	struct vmm_vm base;

	/* creation */
	int kvm_fd, vm_fd;
	struct kvm_caps caps;
	bool has_pit;
	uint32_t ring_entries;		/* 0: no dirty ring */
	int ring_full_efd;		/* eventfd, -1 without a ring */
	const char *memory_file;	/* NULL: memfd (owned copy) */
	bool prealloc;
	enum vmm_fill fill;
	uint64_t seed;
	struct kvm_vm_opts opts;

	/* ctl: guest and layout (fixed once vCPUs run); base.info has blocks "sys" and "ram" */
	char guest[32];			/* guest image name */
	uint64_t entry_gpa;		/* its entry point (boot only) */
	enum vmm_fill init_fill;	/* what never-rewritten pages hold */
	uint64_t init_seed;
	bool init_known;
	uint64_t migrations;		/* incoming migrations so far (GW_PV_MIGRATIONS) */

	/* ctl: vCPUs (base.nr_vcpus of them run) */
	/*
	 * Destination: vCPUs 0..vcpus_ahead-1 made at creation (--vcpus), not
	 * counted in base.nr_vcpus (0 until a load: "has a CPU state") and never
	 * run; the load takes them over (kvm_vcpus_create). Creation and load, ctl.
	 */
	unsigned vcpus_ahead;
	bool vcpus_parked;		/* ctl: their threads wait for the first start (kvm_vcpus_start) */
	struct kvm_load_ctx *load_ahead;	/* ctl: kvm_state_load_ahead, taken by the load */
	struct kvm_vcpu vcpus[KVM_MAX_VCPUS];
	void *rings[KVM_MAX_VCPUS];	/* info.kvm_dirty_rings points here */
	uint32_t ring_fetch[KVM_MAX_VCPUS];	/* info.kvm_dirty_ring_fetch: the tracker's */
	struct kvm_cpuid_entry2 *cpuid;	/* what vCPUs got (vCPU 0's APIC ID), nr_cpuid */
	uint32_t nr_cpuid;
	uint8_t cpu_profile[KVM_PROFILE_MAX_BYTES];	/* info.cpu_profile: cpuid's, for HELLO (kvm_compat.h) */
	uint32_t nr_msrs;		/* MSRs saved and restored, probed on vCPU 0 */
	uint32_t msrs[KVM_COMPAT_MAX_MSRS];
	uint64_t xcr0;

	/*
	 * Destination (creation): this host's supported CPUID and the MSRs a
	 * vCPU with it can restore, probed ahead so that a load from a source
	 * with the same CPUID does not probe inside the downtime.
	 */
	struct kvm_compat *host_compat;	/* NULL: not probed */

	struct kvm_pause pause;
	uint64_t pace_rate_pps;		/* per vCPU, 0 = not paced (creation or load) */

	struct kvm_guest_report report;	/* base.lock: what the guests reported (vCPU threads write) */
};

/* The KVM VM whose base is @b (the base is its first member). */
static inline struct kvm_vm *kvm_of(struct vmm_vm *b)
{
	return (struct kvm_vm *)b;
}

static inline const struct kvm_vm *kvm_of_const(const struct vmm_vm *b)
{
	return (const struct kvm_vm *)b;
}

/* kvm_sys.c */
int kvm_open_dev(char *why, size_t why_len);	/* fd or -errno */
int kvm_probe_caps(int kvm_fd, int vm_fd, struct kvm_caps *c, char *why, size_t why_len);
int kvm_vm_fd_setup(struct kvm_vm *vm, char *why, size_t why_len);
/* Add block @name (memfd, or @fd >= 0 owned from here) and its memslot. */
int kvm_ram_add(struct kvm_vm *vm, const char *name, uint64_t gpa, uint64_t bytes,
		int fd, uint64_t fd_offset, bool *fresh, char *why, size_t why_len);
/* Point block @bi at another fd (local migration): remap and re-register. */
int kvm_ram_replace(struct kvm_vm *vm, unsigned bi, int fd, uint64_t fd_offset,
		    char *why, size_t why_len);
void *kvm_gpa_host(const struct kvm_vm *vm, uint64_t gpa, uint64_t len);

/* kvm_setup.c */
/* KVM_GET_SUPPORTED_CPUID, malloc'd (*n entries), or NULL with errno. */
struct kvm_cpuid_entry2 *kvm_supported_cpuid(int kvm_fd, uint32_t *n);
/* MSRs a vCPU with @cpuid can save and restore, probed in a throwaway VM. */
int kvm_probe_msrs_tmp(int kvm_fd, const struct kvm_cpuid_entry2 *cpuid, uint32_t nr_cpuid,
		       uint32_t *out, uint32_t *nr_out);
int kvm_boot_write(struct kvm_vm *vm, unsigned nr_vcpus, unsigned nr_nics, char *why,
		   size_t why_len);
/*
 * vCPUs 0..@nr-1 with @cpuid. Those that exist already (a destination makes
 * its --vcpus ahead, outside the downtime) take the new CPUID only; fewer
 * than exist is refused.
 */
int kvm_vcpus_create(struct kvm_vm *vm, unsigned nr, const struct kvm_cpuid_entry2 *cpuid,
		     uint32_t nr_cpuid, bool boot_regs, char *why, size_t why_len);
void kvm_vcpus_destroy(struct kvm_vm *vm);
struct gw_boot_info *kvm_boot_info(const struct kvm_vm *vm);
struct gw_vcpu_area *kvm_vcpu_area(const struct kvm_vm *vm, unsigned i);
void kvm_layout_workload(struct kvm_vm *vm);
/* A vCPU's share of a workload rate (pages/s, 0 = not paced). */
uint64_t kvm_pace_per_vcpu(uint64_t rate_pps, unsigned nr_vcpus);

/* kvm_vcpu.c */
int kvm_vcpus_start(struct kvm_vm *vm, bool parked);	/* threads for every vCPU */
void kvm_vcpus_stop(struct kvm_vm *vm);	/* end and join them */
void kvm_kick(void *opaque, unsigned idx);

/* kvm_state.c */
int kvm_state_save(struct kvm_vm *vm, struct gw_state *st);
int kvm_state_load(struct kvm_vm *vm, struct gw_state *st);
/*
 * Destination, at creation: the load's working memory for @nr_vcpus made
 * now and touched (vm->load_ahead), so that a load decodes into memory
 * that does not fault. 0 or -ENOMEM (the load then makes its own).
 */
int kvm_state_load_ahead(struct kvm_vm *vm, unsigned nr_vcpus);
void kvm_state_load_ahead_free(struct kvm_vm *vm);
void kvm_host_compat(const struct kvm_vm *vm, struct kvm_compat *out);
/* Destination: probe this host once, ahead of any migration (vm->host_compat). */
int kvm_host_compat_probe(struct kvm_vm *vm);

/* kvm_check.c */
uint64_t kvm_progress(const struct kvm_vm *vm);
int kvm_check_verify(struct kvm_vm *vm, char *msg, size_t msg_len);
/*
 * Whether the guest's RAM has an exact check: the verify workload, and
 * dirty when the dirty guest runs it (the base's checkable hook).
 */
bool kvm_workload_checkable(const struct kvm_vm *vm);

/* kvm_create.c */
/* Close and free everything of @vm (vCPUs stopped already); the backend's destroy. */
void kvm_vm_free(struct kvm_vm *vm);
/* Publish what the engine's trackers need (vm->info: VM fd, vCPUs, rings). */
void kvm_publish_info(struct kvm_vm *vm);

/* kvm_hooks.c */
extern const struct vmm_vm_hooks kvm_hooks;

/* Reasons: snprintf into a caller's buffer, NULL-safe. */
void kvm_why(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* vmm_kvm.check: what create refuses before making anything (kvm_create.c). */
int kvm_check_config(const struct vmm_config *cfg, char *err, size_t err_len);

#endif
