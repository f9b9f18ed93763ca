/* SPDX-License-Identifier: MIT */
/*
 * Dirty tracking with the KVM dirty ring (KVM_CAP_DIRTY_LOG_RING[_ACQ_REL]):
 * every vCPU has a ring of struct kvm_dirty_gfn {flags, slot, offset} that
 * KVM fills as the vCPU dirties pages of a slot with KVM_MEM_LOG_DIRTY_PAGES.
 * The VMM enabled the ring when it created the VM (KVM allows it only
 * before the first vCPU), mapped each vCPU's ring and keeps, per vCPU, the
 * index of the next entry to harvest (gw_vm_info.kvm_dirty_ring_fetch), so
 * that a later session continues where this one stopped.
 *
 *   harvest: for each vCPU, from its fetch index, while an entry's flags
 *            (load-acquire) have KVM_DIRTY_GFN_F_DIRTY: mark the page in
 *            `pending`, store KVM_DIRTY_GFN_F_RESET (store-release), move on.
 *            Then one KVM_RESET_DIRTY_RINGS re-protects the harvested pages
 *            and frees their entries. A page is writable from its first
 *            write after a reset until the next reset, so a write between
 *            harvest and reset lands in a page already reported, which the
 *            engine reads after collect returns: nothing lost.
 *   collect: harvest, hand `pending` to the caller, empty it.
 *   clear:   none (collect re-arms by itself).
 *
 * A full ring, and the vCPU that waits (the design). KVM stops a vCPU whose
 * ring reaches its soft limit with KVM_EXIT_DIRTY_RING_FULL, and keeps
 * stopping it until its ring is reset. The engine collects only between
 * rounds, which can be seconds apart, so this backend runs a reaper thread
 * from start to stop: it waits on gw_vm_info.kvm_dirty_ring_full_efd (the
 * VMM writes it on every RING_FULL exit) and at most REAP_PERIOD_MS, then
 * harvests every ring into `pending` and resets. The VMM's vCPU thread, after
 * writing the eventfd, sleeps up to 1 ms and re-enters KVM_RUN (an early
 * retry just exits again): a full ring costs the guest about a reap, not a
 * round. Harvests by the reaper and by collect are serialized by `lock`.
 *
 * Overflow. KVM promises a vCPU stops at the soft limit, before its ring is
 * full; a host that runs guests through KVM's instruction emulator (nested,
 * without hardware virtualisation for the guest) breaks that promise: the
 * emulator pushes one entry per emulated store and checks the soft limit
 * only now and then, so a busy vCPU can wrap its ring over entries nobody
 * harvested (the host kernel warns once in kvm_dirty_ring_push). Lost
 * entries are lost pages, so the backend watches for it: a harvest that
 * finds a ring (nearly) full, or a ring whose next entry is empty while a
 * later one is dirty (KVM's index moved past ours), marks every page dirty
 * for the next collect (a full resend: correct, only slower), realigns its
 * index with KVM's (the empty gap is marked harvested, so KVM's reset walks
 * over it) and logs a warning. The reaper harvests every REAP_PERIOD_MS to
 * keep rings far from full; the VMM makes rings large. The KVM dirty bitmap
 * (kvm-log) has no such limit.
 *
 * start/stop turn KVM_MEM_LOG_DIRTY_PAGES on and off on every slot; start
 * first drops entries older than itself, stop harvests and resets what is
 * left so the rings are empty for the next session.
 *
 * Threads: the migration thread calls start, collect, stop; the reaper
 * thread exists between them; `lock` guards pending and the fetch indices.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/kvm.h>
#include <godwit/log.h>
#include "mem/dirty.h"
#include "util/thread_name.h"

#define REAP_PERIOD_MS 10
#define FULL_SLACK_ENTRIES 16		/* a harvest this close to the ring size: overflow feared */

struct kvm_ring {
	const struct gw_vm_info *vm;	/* set at start */
	pthread_mutex_t lock;
	struct gw_bitmap pending[GW_MAX_RAM_BLOCKS];	/* lock: harvested, not collected */
	unsigned nr_blocks;		/* set at start */
	bool logging[GW_MAX_RAM_BLOCKS];	/* migration thread */
	pthread_t reaper;
	bool reaper_started;		/* migration thread */
	int stop_efd;			/* wakes the reaper to end */
	bool overflow;			/* lock: entries may have been lost: report everything */
	uint64_t reaps, foreign_entries, overflows;	/* lock: statistics */
};

static int set_logging(const struct gw_vm_info *vm, unsigned bi, bool on)
{
	const struct gw_ram_block *b = &vm->blocks[bi];
	struct kvm_userspace_memory_region r = {
		.slot = b->kvm_slot,
		.flags = on ? KVM_MEM_LOG_DIRTY_PAGES : 0,
		.guest_phys_addr = b->gpa,
		.memory_size = b->size_bytes,
		.userspace_addr = (uintptr_t)b->host,
	};

	return ioctl(vm->kvm_vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0 ? -errno : 0;
}

static int kvm_ring_probe(const struct gw_vm_info *vm)
{
	if (!vm || vm->kvm_vm_fd < 0 || !vm->kvm_dirty_ring_entries ||
	    (vm->kvm_dirty_ring_entries & (vm->kvm_dirty_ring_entries - 1)) ||
	    !vm->kvm_dirty_rings || !vm->kvm_dirty_ring_fetch || !vm->nr_vcpus)
		return -EOPNOTSUPP;
	if (vm->nr_blocks == 0 || vm->nr_blocks > GW_MAX_RAM_BLOCKS)
		return -EINVAL;
	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		if (!vm->kvm_dirty_rings[i])
			return -EOPNOTSUPP;
	for (unsigned i = 0; i < vm->nr_blocks; i++)
		if (!vm->blocks[i].host || vm->blocks[i].page_size_bytes != GW_PAGE_BYTES)
			return -EINVAL;
	return 0;
}

/*
 * lock held. Ring @c's next entry is empty: if a later one is dirty, KVM's
 * index moved past ours (an overflow wrapped the ring). Mark the gap
 * harvested so KVM's reset walks over it and continue from the dirty
 * entry. Returns true when it realigned.
 */
static bool realign(struct kvm_ring *k, unsigned c)
{
	const struct gw_vm_info *vm = k->vm;
	struct kvm_dirty_gfn *ring = vm->kvm_dirty_rings[c];
	uint32_t size = vm->kvm_dirty_ring_entries, fetch = vm->kvm_dirty_ring_fetch[c], j;

	for (j = 1; j < size; j++)
		if (__atomic_load_n(&ring[(fetch + j) & (size - 1)].flags, __ATOMIC_ACQUIRE) &
		    KVM_DIRTY_GFN_F_DIRTY)
			break;
	/* KVM fills entries in order: an entry pushed meanwhile at fetch is no gap. */
	if (j == size || (__atomic_load_n(&ring[fetch & (size - 1)].flags, __ATOMIC_ACQUIRE) &
			  KVM_DIRTY_GFN_F_DIRTY))
		return false;
	for (uint32_t i = 0; i < j; i++)
		__atomic_store_n(&ring[(fetch + i) & (size - 1)].flags, KVM_DIRTY_GFN_F_RESET,
				 __ATOMIC_RELEASE);
	vm->kvm_dirty_ring_fetch[c] = fetch + j;
	return true;
}

/* lock held. Harvest ring @c from its fetch index; returns entries taken. */
static uint64_t harvest_ring(struct kvm_ring *k, unsigned c, bool keep)
{
	const struct gw_vm_info *vm = k->vm;
	struct kvm_dirty_gfn *ring = vm->kvm_dirty_rings[c];
	uint32_t mask = vm->kvm_dirty_ring_entries - 1, fetch = vm->kvm_dirty_ring_fetch[c];
	uint64_t n = 0;

	for (;;) {
		struct kvm_dirty_gfn *e = &ring[fetch & mask];
		uint32_t flags = __atomic_load_n(&e->flags, __ATOMIC_ACQUIRE);
		unsigned bi;

		if (!(flags & KVM_DIRTY_GFN_F_DIRTY))
			break;
		for (bi = 0; bi < k->nr_blocks; bi++)
			if (vm->blocks[bi].kvm_slot == (e->slot & 0xffff) && !(e->slot >> 16))
				break;
		if (keep && bi < k->nr_blocks && e->offset < k->pending[bi].nr_bits)
			gw_bitmap_set(&k->pending[bi], e->offset);
		else if (keep)
			k->foreign_entries++;	/* another slot or address space */
		__atomic_store_n(&e->flags, KVM_DIRTY_GFN_F_RESET, __ATOMIC_RELEASE);
		fetch++;
		n++;
	}
	vm->kvm_dirty_ring_fetch[c] = fetch;
	return n;
}

/*
 * lock held. Harvest every ring into pending (or drop when !keep), then
 * reset. @scan: also look for a misaligned ring (a full scan of each ring:
 * done by collect and when a vCPU reported its ring full, not on timer reaps).
 */
static int harvest(struct kvm_ring *k, bool keep, bool scan)
{
	const struct gw_vm_info *vm = k->vm;
	uint32_t size = vm->kvm_dirty_ring_entries;
	uint64_t n = 0;

	for (unsigned c = 0; c < vm->nr_vcpus; c++) {
		uint64_t got = harvest_ring(k, c, keep);
		bool gap = scan && !got && realign(k, c);

		if (gap)
			got += harvest_ring(k, c, keep);
		if (keep && (gap || got + FULL_SLACK_ENTRIES >= size)) {
			if (!k->overflows++)
				gw_log(GW_LOG_WARN, "dirty", "kvm_ring_overflow",
				       "vcpu=%u entries=%llu ring_entries=%u action=resend_all",
				       c, (unsigned long long)got, size);
			k->overflow = true;
		}
		n += got;
	}
	if (n && ioctl(vm->kvm_vm_fd, KVM_RESET_DIRTY_RINGS, 0) < 0)
		return -errno;
	return 0;
}

static void *reaper_main(void *arg)
{
	struct gw_dirty *d = arg;
	struct kvm_ring *k = d->priv;
	struct pollfd pfd[2] = {
		{ .fd = k->stop_efd, .events = POLLIN },
		{ .fd = d->vm->kvm_dirty_ring_full_efd, .events = POLLIN },
	};
	uint64_t v;

	for (;;) {
		int r = poll(pfd, pfd[1].fd >= 0 ? 2 : 1, REAP_PERIOD_MS);
		bool full = r > 0 && (pfd[1].revents & POLLIN);

		if (r > 0 && (pfd[0].revents & POLLIN))
			break;
		if (full && read(pfd[1].fd, &v, sizeof(v)) < 0)
			(void)0;	/* EAGAIN: another reader was first */
		pthread_mutex_lock(&k->lock);
		if (harvest(k, true, full) == 0)
			k->reaps++;
		pthread_mutex_unlock(&k->lock);
	}
	return NULL;
}

static void kvm_ring_stop(struct gw_dirty *d)
{
	struct kvm_ring *k = d->priv;
	uint64_t one = 1;

	if (!k)
		return;
	if (k->reaper_started) {
		if (write(k->stop_efd, &one, sizeof(one)) < 0)
			(void)0;	/* cannot fail on a fresh eventfd */
		pthread_join(k->reaper, NULL);
	}
	for (unsigned i = 0; i < k->nr_blocks; i++)
		if (k->logging[i])
			(void)set_logging(d->vm, i, false);	/* nothing to undo on failure */
	pthread_mutex_lock(&k->lock);
	(void)harvest(k, false, true);	/* leave the rings empty for the next session */
	if (k->overflows)
		gw_log(GW_LOG_WARN, "dirty", "kvm_ring_overflows", "count=%llu",
		       (unsigned long long)k->overflows);
	gw_debug("dirty", "kvm_ring_stop", "reaps=%llu foreign_entries=%llu",
		 (unsigned long long)k->reaps, (unsigned long long)k->foreign_entries);
	pthread_mutex_unlock(&k->lock);
	for (unsigned i = 0; i < k->nr_blocks; i++)
		gw_bitmap_free(&k->pending[i]);
	if (k->stop_efd >= 0)
		close(k->stop_efd);
	pthread_mutex_destroy(&k->lock);
	free(k);
	d->priv = NULL;
}

static int kvm_ring_start(struct gw_dirty *d)
{
	struct kvm_ring *k = calloc(1, sizeof(*k));
	int ret;

	if (!k)
		return -ENOMEM;
	k->vm = d->vm;
	k->stop_efd = -1;
	pthread_mutex_init(&k->lock, NULL);
	d->priv = k;
	for (unsigned i = 0; i < d->vm->nr_blocks; i++) {
		k->nr_blocks = i + 1;
		if (gw_bitmap_init(&k->pending[i], d->vm->blocks[i].size_bytes / GW_PAGE_BYTES) < 0) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	pthread_mutex_lock(&k->lock);
	ret = harvest(k, false, true);	/* entries from before start are not ours */
	pthread_mutex_unlock(&k->lock);
	for (unsigned i = 0; i < k->nr_blocks && !ret; i++) {
		ret = set_logging(d->vm, i, true);
		k->logging[i] = ret == 0;
	}
	if (ret)
		goto fail;
	k->stop_efd = eventfd(0, EFD_CLOEXEC);
	if (k->stop_efd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = -pthread_create(&k->reaper, NULL, reaper_main, d);
	if (ret)
		goto fail;
	gw_thread_name(k->reaper, "gw-kvm-reap");
	k->reaper_started = true;
	return 0;
fail:
	kvm_ring_stop(d);
	return ret;
}

static ssize_t kvm_ring_collect(struct gw_dirty *d, struct gw_bitmap *out)
{
	struct kvm_ring *k = d->priv;
	ssize_t total = 0;
	int ret;

	if (!k)
		return -EINVAL;
	pthread_mutex_lock(&k->lock);
	ret = harvest(k, true, true);
	for (unsigned i = 0; i < k->nr_blocks && !ret; i++) {
		if (k->overflow)
			gw_bitmap_set_all(&k->pending[i]);	/* entries were lost: all pages */
		total += (ssize_t)gw_bitmap_weight(&k->pending[i]);
		gw_bitmap_or(&out[i], &k->pending[i]);
		gw_bitmap_zero(&k->pending[i]);
	}
	if (!ret)
		k->overflow = false;
	pthread_mutex_unlock(&k->lock);
	return ret ? ret : total;
}

const struct gw_dirty_ops gw_dirty_kvm_ring = {
	.name = "kvm-ring",
	.id = GW_DIRTY_KVM_RING,
	.probe = kvm_ring_probe,
	.start = kvm_ring_start,
	.collect = kvm_ring_collect,
	.clear = NULL,
	.stop = kvm_ring_stop,
};
