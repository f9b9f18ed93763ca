/* SPDX-License-Identifier: MIT */
/*
 * What a VMM hands the engine: RAM blocks, an optional KVM VM fd for the
 * KVM dirty-tracking backends, and callbacks for pause/resume and state.
 * The engine knows nothing about vCPUs or devices.
 */
#ifndef GODWIT_VM_H
#define GODWIT_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/export.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The page size of guest RAM: the unit of dirty tracking and of transfer.
 * Only 4 KiB is accepted today; every size in the engine derives from
 * GW_PAGE_SHIFT, so another size is a change of this line (and of what the
 * wire accepts, GW_WIRE_PAGE_BYTES).
 */
#define GW_PAGE_SHIFT 12
#define GW_PAGE_BYTES (1u << GW_PAGE_SHIFT)

#define GW_RAM_NAME_MAX 32		/* including the NUL */
/*
 * The most RAM blocks a session takes (the wire's limit). It bounds no
 * public struct: gw_vm_info points at the caller's array.
 */
#define GW_MAX_RAM_BLOCKS 64

/*
 * The structs a VMM gives the library can grow (Linux's clone_args rule,
 * libgodwit(3)): gw_vm_info and gw_vm_ops begin with uint32_t size, which
 * the VMM sets to sizeof the struct it was built with. The library copies
 * what both know, reads a field it has and the VMM does not as 0 (a hook:
 * NULL), refuses a size below the first version (_SIZE_VER0, constants that
 * never change) with EINVAL, and a larger struct whose bytes past its own
 * are not all zero with E2BIG. Fields are only ever appended.
 */
#define GW_VM_INFO_SIZE_VER0 56		/* first version of struct gw_vm_info */
#define GW_VM_OPS_SIZE_VER0 96		/* first version of struct gw_vm_ops */

/*
 * One RAM block: an element of the array gw_vm_info.blocks points at, so
 * it never changes size. What a later version knows of each block comes as
 * a new array of the same length, pointed at from a field appended to
 * gw_vm_info.
 */
struct gw_ram_block {
	char name[GW_RAM_NAME_MAX];	/* stable id, matched by name across hosts */
	uint64_t gpa;			/* guest-physical base address */
	void *host;			/* host mapping, size_bytes long, page aligned */
	uint64_t size_bytes;		/* multiple of page_size_bytes */
	uint32_t page_size_bytes;	/* GW_PAGE_BYTES (the only size accepted today) */
	int fd;				/* backing fd (memfd, file) or -1 for anonymous */
	uint64_t fd_offset_bytes;	/* offset of the block in fd */
	uint32_t kvm_slot;		/* KVM memslot id (KVM backends only) */
};

struct gw_vm_info {
	uint32_t size;			/* caller: sizeof(struct gw_vm_info) */
	unsigned nr_blocks;		/* 0..GW_MAX_RAM_BLOCKS */
	/*
	 * nr_blocks blocks, the caller's array: the call given this struct
	 * copies it (the library never writes through it nor keeps it).
	 */
	struct gw_ram_block *blocks;
	int kvm_vm_fd;			/* -1 when not a KVM VM */
	unsigned nr_vcpus;
	/*
	 * KVM dirty ring (the kvm-ring tracker). A VM without one leaves
	 * kvm_dirty_ring_entries 0 and the rest unused. The VMM owns the
	 * storage behind the pointers (valid while the VM lives, nr_vcpus
	 * entries each) and maps the rings; blocks[i].kvm_slot are its memslots.
	 */
	uint32_t kvm_dirty_ring_entries;	/* entries per vCPU ring (a power of two), 0 = no ring */
	void *const *kvm_dirty_rings;		/* vCPU i's ring: struct kvm_dirty_gfn[entries] */
	uint32_t *kvm_dirty_ring_fetch;		/* vCPU i's next entry to harvest: written only by
						   the tracker, kept by the VMM across sessions */
	/*
	 * An eventfd the VMM writes (1) when a vCPU exits with
	 * KVM_EXIT_DIRTY_RING_FULL, or -1. The vCPU then retries KVM_RUN at
	 * least every millisecond until the tracker has harvested and reset
	 * its ring (src/mem/dirty_kvm_ring.c).
	 */
	int kvm_dirty_ring_full_efd;
	/*
	 * Appended: what the source's VMM says of its vCPUs (model, features),
	 * opaque to the engine, at most GW_CPU_PROFILE_MAX_BYTES. It travels in
	 * HELLO with nr_vcpus, and the destination's VMM receives it in
	 * setup_ram's @want, so that it refuses a CPU it could not load before
	 * round 0. NULL and 0: none. The VMM owns the bytes (valid while the VM
	 * lives).
	 */
	const void *cpu_profile;
	uint32_t cpu_profile_bytes;
};

#define GW_CPU_PROFILE_MAX_BYTES 1024

/* Device and vCPU state travels as opaque, named, versioned sections. */
#define GW_SECTION_NAME_MAX 32
struct gw_state;			/* opaque: a list of sections */
struct gw_session;

/* Add a section (the data is copied). Returns 0 or -ENOMEM / -EINVAL / -E2BIG. */
GW_EXPORT int gw_state_add(struct gw_state *st, const char *name, uint32_t version,
		 const void *data, size_t len_bytes);
/*
 * Find a section by name. Returns a pointer to its bytes (valid while @st
 * lives) and stores version and length, or NULL when absent.
 */
GW_EXPORT const void *gw_state_find(const struct gw_state *st, const char *name,
			  uint32_t *version, size_t *len_bytes);
GW_EXPORT unsigned gw_state_count(const struct gw_state *st);

/*
 * A load or check callback that refuses state reports why through this, so
 * that the reason travels back to the source. Returns @err for convenience.
 */
GW_EXPORT int gw_state_reject(struct gw_state *st, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct gw_vm_ops {
	uint32_t size;			/* sizeof(struct gw_vm_ops): hooks past it are NULL */
	/*
	 * Stop every vCPU and device; returns once none runs and no device
	 * touches guest RAM, every device write reported with
	 * gw_session_mark_dirty() (the final harvest follows). 0 or -errno.
	 * Required.
	 */
	int (*pause)(void *opaque);
	/*
	 * Restart the vCPUs. 0 or -errno. Required. With the rt-priority
	 * parameter set it is called from a SCHED_FIFO thread (the end of the
	 * downtime is on the critical path): a thread it creates must set its
	 * own scheduling policy (PTHREAD_EXPLICIT_SCHED) or it inherits that.
	 */
	int (*resume)(void *opaque);
	/* Source, vCPUs paused: add every section to @st. 0 or -errno. */
	int (*save_state)(void *opaque, struct gw_state *st);
	/*
	 * Destination, vCPUs not running: apply @st. On refusal call
	 * gw_state_reject() and return its value. Required on the destination.
	 */
	int (*load_state)(void *opaque, struct gw_state *st);
	/*
	 * Destination, optional: the source announced its RAM layout in @want
	 * (host pointers NULL; with local migration, fd set to a received fd
	 * which the callee then owns), its vCPU count in @want->nr_vcpus and
	 * the source VMM's cpu_profile (0 and NULL: the source did not say).
	 * This runs before round 0, while the source runs on: refuse here
	 * whatever the state would be refused for at the switchover (RAM, vCPU
	 * count, CPU model and features). Create or check the RAM and fill @vm
	 * (its size is set; the VMM may assign its own gw_vm_info whole, and
	 * points blocks at its array, which the engine copies on return).
	 * When NULL, the engine compares @want with the gw_vm_info given at
	 * session creation (blocks, and nr_vcpus when both are set). 0 or -errno (use gw_state_reject-like reason via
	 * @reason, @reason_len).
	 */
	int (*setup_ram)(void *opaque, const struct gw_vm_info *want,
			 struct gw_vm_info *vm, char *reason, size_t reason_len);
	/*
	 * Optional: keep the vCPUs from running @pct percent of the time
	 * (0 = off; auto-converge). 0 or -errno.
	 */
	int (*throttle)(void *opaque, unsigned pct);
	/*
	 * Optional: cap each vCPU's dirty rate at @bytes_per_sec (0 = off;
	 * dirty limit). The VMM enforces it (soft vCPUs take a token per page
	 * they dirty; the KVM VMM's guests at their pace calls, per batch). 0 or -errno.
	 */
	int (*dirty_limit)(void *opaque, uint64_t bytes_per_sec);
	/*
	 * Optional: free-page hints. The engine calls hints_start once dirty
	 * tracking runs, before round 0's pages are read; from then until
	 * hints_stop (at the pause, or when the migration ends) the VMM may
	 * report guest pages whose content does not matter with
	 * gw_session_hint_free() on @s, from any thread, the first time from
	 * within hints_start itself.
	 */
	void (*hints_start)(void *opaque, struct gw_session *s);
	void (*hints_stop)(void *opaque);
	/*
	 * Optional, destination, postcopy. vcpu_of_thread: the index of the
	 * vCPU that thread @tid runs, or -1 (per-vCPU blocktime; called from
	 * the fault handler, must not block). postcopy_ram: @complete false
	 * right before the resume of a postcopy switch: RAM is incomplete and
	 * must be reached only through the registered mappings (a fault waits
	 * for its page; reads through a file descriptor see stale pages);
	 * returns the number of vCPUs the VM will run (0: unknown). @complete
	 * true once every page is there (returns 0). A destination whose VMM
	 * leaves postcopy_ram NULL refuses postcopy at HELLO (the source has
	 * not paused yet) with -EOPNOTSUPP.
	 */
	int (*vcpu_of_thread)(void *opaque, pid_t tid);
	int (*postcopy_ram)(void *opaque, bool complete);
};

#ifdef __cplusplus
}
#endif
#endif
