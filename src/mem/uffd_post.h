/* SPDX-License-Identifier: MIT */
/*
 * The destination's guest RAM under postcopy: a userfaultfd through which
 * every first touch of a page that is not there yet stops the toucher (a
 * soft vCPU, a KVM vCPU inside KVM_RUN, any thread) until the page is
 * placed. Only memory operations: no session, no sockets, no threads.
 *
 *   fd-backed RAM (memfd, tmpfs): registered MISSING | MINOR. Precopy wrote
 *     pages into the page cache with pwrite and never mapped them; open
 *     drops every page-table entry of the block (MADV_DONTNEED keeps the
 *     page cache of shared memory), so a first touch of a page in the page
 *     cache is a minor fault and of a hole a missing fault. A page is placed
 *     by writing it into the page cache through a second mapping of the
 *     file, not registered, while nothing maps it in the guest's (not with
 *     pwrite: that takes the inode lock, for which every other placement
 *     would wait), then mapping it with UFFDIO_CONTINUE, which also wakes
 *     every thread waiting on it, whichever kind of fault it took. A page whose cached
 *     copy is right is mapped with UFFDIO_CONTINUE alone; a trusted hole
 *     with UFFDIO_ZEROPAGE.
 *   anonymous RAM: registered MISSING. Precopy wrote pages through the
 *     mapping; the pages the destination must not trust are dropped
 *     (gw_uffd_post_zap) and placed with UFFDIO_COPY / UFFDIO_ZEROPAGE.
 *
 * Either way a page becomes visible to the guest whole, in one step (the
 * page-table entry appears). Place each page at most once: the caller
 * claims it first (dest/postcopy.c). For anonymous RAM the kernel refuses a
 * second copy (-EEXIST), but for fd-backed RAM the page cache is written
 * before the kernel sees that the page is mapped already, so a second
 * placement would overwrite what the guest wrote.
 *
 * KVM reaches guest RAM through this same host mapping (get_user_pages
 * from inside KVM_RUN), so its vCPUs fault here too; that needs a
 * userfaultfd that traps kernel-mode faults (root, CAP_SYS_PTRACE or
 * vm.unprivileged_userfaultfd=1): gw_uffd_post_open says when it only got
 * a user-mode one.
 *
 * Threads: any thread may call place/zero/resolve/wake concurrently (one
 * ioctl each, the kernel serialises); reading faults is one thread's job;
 * open and close belong to one owner.
 */
#ifndef GW_MEM_UFFD_POST_H
#define GW_MEM_UFFD_POST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <godwit/vm.h>

struct gw_uffd_post;

struct gw_uffd_fault {
	unsigned block;
	uint64_t page;			/* in the block */
	pid_t tid;			/* the thread that faulted (0 when unknown) */
	bool minor;			/* the page was in the page cache */
};

/* Whether this kernel offers what postcopy needs. 0, or -EOPNOTSUPP / -errno with @why. */
int gw_uffd_post_probe(char *why, size_t why_len);
/*
 * Register every block of @vm (by reference: it must outlive the object)
 * and drop the page tables of fd-backed blocks. *@user_only tells that only
 * user-mode faults are trapped (KVM guests would not fault here). 0 and
 * *@out, or -errno.
 */
int gw_uffd_post_open(const struct gw_vm_info *vm, struct gw_uffd_post **out, bool *user_only);
/* The descriptor to poll for faults. */
int gw_uffd_post_fd(const struct gw_uffd_post *u);
/* Up to @max pending faults, without waiting: their count, 0, or -errno. */
int gw_uffd_post_read(struct gw_uffd_post *u, struct gw_uffd_fault *out, int max);
/* Drop pages [@page, @page + @nr) of @block from the page tables (anonymous: frees them). 0 or -errno. */
int gw_uffd_post_zap(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr);
/*
 * Place @nr pages from @src (contiguous) at @page of @block, each claimed by
 * the caller and never placed before. 0, -EEXIST (one was mapped: a bug),
 * -errno.
 */
int gw_uffd_post_place(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr,
		       const void *src);
/* Place @nr zero pages. 0, -EEXIST, -errno. */
int gw_uffd_post_zero(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr);
/*
 * Map one page whose content is already right (a fault on a page that is
 * there): @minor from the fault. Another thread having mapped it first is
 * fine (the waiters are woken). 0 or -errno.
 */
int gw_uffd_post_resolve(struct gw_uffd_post *u, unsigned block, uint64_t page, bool minor);
/*
 * fd-backed RAM: map @nr pages from @page whose page-cache copies are right,
 * skipping any page mapped already (a fault's resolution got there first).
 * 0 or -errno.
 */
int gw_uffd_post_map_cached(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr);
/* Wake threads waiting on one page (already mapped). 0 or -errno. */
int gw_uffd_post_wake(struct gw_uffd_post *u, unsigned block, uint64_t page);
/* Host address of a page (for reading a page that nobody can write yet). */
const uint8_t *gw_uffd_post_host(const struct gw_uffd_post *u, unsigned block, uint64_t page);
/* Stop trapping: unregister every block (waiters retry without us). The fd stays open. */
void gw_uffd_post_unregister(struct gw_uffd_post *u);
/* Unregister and close. NULL is fine. */
void gw_uffd_post_close(struct gw_uffd_post *u);

#endif
