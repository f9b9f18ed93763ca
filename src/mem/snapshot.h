/* SPDX-License-Identifier: MIT */
/*
 * The RAM digest of a destination as it was at resume, taken while the VM
 * runs: verification that costs the guest no downtime.
 *
 * At resume, every chunk (GW_DIGEST_CHUNK_BYTES) holding a page the
 * migration wrote is write-protected with userfaultfd in synchronous mode
 * (the way QEMU's background snapshot works); most of them already are,
 * protected during precopy (gw_snapshot_protect) so that the pause does
 * not pay for it. After resume a fault-handler
 * thread catches the guest's first write into a chunk not hashed yet,
 * hashes that chunk as it still is, then unprotects it; the digest workers
 * hash the other chunks and unprotect them as they go. So every chunk is
 * hashed exactly as it was at resume, and the result equals
 * gw_ram_digest_masked() taken at that moment. A vCPU waits at most one
 * chunk's hash (tens of microseconds) on a first write; KVM guests fault
 * the same way through the host mapping.
 *
 * Writes through another mapping of the same memory (pwrite into a memfd)
 * are not caught: the engine only writes RAM that way before resume.
 *
 * Threads: created and ended by one thread (the destination's migration
 * thread); the handler thread and the digest workers share the per-chunk
 * state under striped locks.
 */
#ifndef GW_MEM_SNAPSHOT_H
#define GW_MEM_SNAPSHOT_H

#include <stdint.h>
#include <godwit/vm.h>
#include "mem/bitmap.h"
#include "mem/digest.h"

struct gw_snapshot;

/*
 * Register @vm's blocks with userfaultfd (sync write-protect) and start the
 * handler thread, unarmed: until gw_snapshot_arm, a write into a protected
 * chunk just unprotects it (arming protects it again). 0 and *@out,
 * -EOPNOTSUPP (no uffd-wp here), -errno.
 */
int gw_snapshot_new(const struct gw_vm_info *vm, struct gw_snapshot **out);
/*
 * Protect ahead of time the chunks covering pages [@first, @first + @nr)
 * of block @block: fd-backed RAM that the migration writes with pwrite can
 * be protected during precopy, so that arming at resume has little left to
 * do. Any thread. 0 or -errno.
 */
int gw_snapshot_protect(struct gw_snapshot *snap, unsigned block, uint64_t first, uint64_t nr);
/*
 * At resume (the guest not running yet): protect every chunk holding a
 * page of @may_hold_data (one bitmap per block, by reference: unchanged
 * until gw_snapshot_free) that is not protected yet, and arm the handler.
 * The digest is of RAM as it is now. 0 or -errno.
 */
int gw_snapshot_arm(struct gw_snapshot *snap, const struct gw_bitmap *may_hold_data);
/* The digest of RAM as at gw_snapshot_arm; every chunk is unprotected after. 0 or -errno. */
int gw_snapshot_digest(struct gw_snapshot *snap, unsigned nr_threads, struct gw_digest *out);
/* Guest writes that had to wait for a chunk's hash so far. */
uint64_t gw_snapshot_faults(const struct gw_snapshot *snap);
/*
 * Give the RAM up (postcopy takes it over): unregister every block; later
 * protects do nothing and the snapshot is never armed. NULL is fine.
 */
void gw_snapshot_disable(struct gw_snapshot *snap);
/* Stop the handler, unprotect and unregister everything. NULL is fine. */
void gw_snapshot_free(struct gw_snapshot *snap);

#endif
