/* SPDX-License-Identifier: MIT */
/*
 * Dirty-tracking backends: one file each (dirty_*.c), only static functions
 * inside and one exported const ops; the explicit table gw_dirty_backends[]
 * in dirty.c lists them in preference order. Tests iterate the whole table.
 *
 * Threads: a struct gw_dirty is owned by the migration thread of the source
 * session; the guest (vCPUs) writes RAM concurrently.
 */
#ifndef GW_DIRTY_H
#define GW_DIRTY_H

#include <sys/types.h>
#include <godwit/params.h>
#include <godwit/vm.h>
#include "mem/bitmap.h"

struct gw_dirty;

struct gw_dirty_ops {
	const char *name;			/* "kvm-ring", "kvm-log", "uffd-wp" */
	enum gw_dirty_backend_id id;
	/* 0 = usable for @vm here (NULL: plain process memory), else -EOPNOTSUPP (or -errno) */
	int (*probe)(const struct gw_vm_info *vm);
	/* Begin tracking; every write after start() returns is reported. 0 or -errno. */
	int (*start)(struct gw_dirty *d);
	/*
	 * Harvest: OR the pages written since the previous collect (or start)
	 * into out[i] for block i (vm->nr_blocks bitmaps, one bit per page),
	 * and re-arm tracking for them, atomically per page: a write racing
	 * with collect is reported now or by the next collect, never lost.
	 * A backend may report a page that was not written (its file says
	 * when); it never misses one. Returns the number of pages reported
	 * that were re-armed since their last report: each page written
	 * since the previous collect counted once (a backend with clear
	 * reports again, and does not count, a page not cleared since its
	 * last report). The dirty rate, auto-converge's trigger and the dirty
	 * limit read this count. -errno on failure.
	 */
	ssize_t (*collect)(struct gw_dirty *d, struct gw_bitmap *out);
	/*
	 * Optional: the last harvest, the guest paused (switchover): the same
	 * report as collect without re-arming anything (tracking ends after),
	 * as fast as the backend can make it. NULL: collect is used.
	 */
	ssize_t (*collect_last)(struct gw_dirty *d, struct gw_bitmap *out);
	/*
	 * Optional (NULL when collect re-arms by itself): re-arm the pages of
	 * @count from @first of block @block that collect reported, and those
	 * of @mask (bit i: page @first + i, @count bits), just before the
	 * pages of @mask are read for sending (KVM manual dirty-log clear).
	 * 0 or -errno.
	 */
	int (*clear)(struct gw_dirty *d, unsigned block, uint64_t first, uint64_t count,
		     const uint64_t *mask);
	/*
	 * Optional: bit i of @mask (@nr bits, at most 1024) set when page
	 * @first + i of block @block may have changed since it was last
	 * re-armed (by start, collect or clear): written, or no longer
	 * mapped. Nothing is re-armed. A channel thread asks it after sending
	 * pages straight from guest memory, to name the pages the guest wrote
	 * meanwhile (PAGES_VOID); collect must not run between the send and
	 * this call (source/precopy.c drains the channels before every harvest).
	 * Any thread. 0 or -errno. NULL: pages are never sent from live memory.
	 */
	int (*written)(struct gw_dirty *d, unsigned block, uint64_t first, uint32_t nr, uint64_t *mask);
	/* End tracking, free backend state. Safe after a failed start. */
	void (*stop)(struct gw_dirty *d);
};

struct gw_dirty {
	const struct gw_dirty_ops *ops;		/* set at creation */
	const struct gw_vm_info *vm;		/* set at creation, outlives d */
	void *priv;				/* backend state */
};

/* Preference order, NULL-terminated. */
extern const struct gw_dirty_ops *const gw_dirty_backends[];

/*
 * Choose a backend: @want = GW_DIRTY_AUTO picks the first whose probe says
 * yes; otherwise that backend or -EOPNOTSUPP. Fills d->ops and d->vm.
 */
int gw_dirty_select(struct gw_dirty *d, const struct gw_vm_info *vm,
		    enum gw_dirty_backend_id want);

#endif
