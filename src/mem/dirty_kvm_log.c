/* SPDX-License-Identifier: MIT */
/*
 * Dirty tracking with the KVM dirty bitmap and manual re-protection
 * (KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2):
 *
 *   start:   enable manual protection, with KVM_DIRTY_LOG_INITIALLY_SET
 *            where KVM offers it, then turn on KVM_MEM_LOG_DIRTY_PAGES on
 *            every block's memslot. Without INITIALLY_SET KVM write-protects
 *            the whole slot there: a walk over every page, 20-50 ms for a
 *            64 GiB slot on the nested hosts here, whatever the guest
 *            touched. With it KVM protects nothing and sets every bit of
 *            its bitmap: each page starts "unarmed", dirty in KVM and free
 *            to be written, until clear() arms it.
 *   collect: KVM_GET_DIRTY_LOG per slot. With manual protection KVM only
 *            copies its bitmap: nothing is cleared or re-protected, so a
 *            page stays dirty in KVM until clear(). The armed pages' bits
 *            are ORed into the caller's bitmaps and into `reported`. A page
 *            reported before and not cleared since (the engine has not sent
 *            it yet: a round cut mid-pass, a long pass at a capped rate) is
 *            reported again, since a free-page hint may have taken it out
 *            of the engine's set while it is writable and unseen, but it is
 *            not counted: the count is the pages written since the last
 *            collect that KVM can tell apart, each once, which is what the
 *            dirty rate, auto-converge and the dirty limit read. Counting
 *            every set bit made it the backlog of pages awaiting their
 *            clear, growing round after round at a constant guest rate. An
 *            unarmed page's bit says nothing (always set): it is reported
 *            when it is populated in its fd (SEEK_DATA, mem/populated.h),
 *            and from then on is an armed page awaiting its clear. One that
 *            is still a hole was never written, or was written and then
 *            punched: it reads as zero, and since it was never sent the
 *            destination holds zero there too.
 *   clear:   just before a chunk is read for sending, KVM_CLEAR_DIRTY_LOG
 *            re-protects the chunk's pages that collect reported (only
 *            those: a page of the chunk written after the collect was not
 *            reported, is not sent now, and must stay dirty for the next
 *            collect), and arms the unarmed pages among those read now
 *            (@mask: round 0 reads populated pages no collect reported).
 *            A write after the clear dirties the page again; a write
 *            before it is in what the engine reads next. Nothing lost, and
 *            no page is sent unarmed, which is what the hole rule of
 *            collect rests on. KVM wants first_page and num_pages multiples
 *            of 64 (or the range ending at the slot's end): the chunk is
 *            widened, its bitmap keeps only the bits inside
 *            [first, first+count).
 *   stop:    logging off on every slot.
 *
 * INITIALLY_SET is used only when every block has an fd to ask about holes
 * (the KVM VMM's memfds; an anonymous block would report every unarmed
 * page at the first collect) and most of the RAM is holes
 * (want_initially_set says why).
 *
 * The VMM registered each block as memslot blocks[i].kvm_slot at blocks[i].gpa
 * over blocks[i].host with flags 0; KVM allows changing only the flags.
 * A VM with a dirty ring has no dirty bitmap: probe says no there.
 *
 * Threads: the priv state belongs to the migration thread (start, collect,
 * clear, stop); vCPUs dirty pages concurrently inside KVM.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/kvm.h>
#include <godwit/log.h>
#include "mem/dirty.h"
#include "mem/populated.h"

struct kvm_log_block {
	uint64_t nr_pages;
	uint64_t *kbuf;			/* KVM_GET_DIRTY_LOG target, 64-bit words */
	struct gw_bitmap reported;	/* collected, not yet cleared */
	struct gw_bitmap armed;		/* INITIALLY_SET: cleared once, or reported (else unarmed) */
	bool logging;			/* KVM_MEM_LOG_DIRTY_PAGES set */
};

struct kvm_log {
	unsigned nr_blocks;
	bool initially_set;		/* KVM_DIRTY_LOG_INITIALLY_SET enabled */
	uint64_t *scratch;		/* clear() bitmap, largest block's words */
	struct kvm_log_block blk[GW_MAX_RAM_BLOCKS];
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

static int kvm_log_probe(const struct gw_vm_info *vm)
{
	int flags;

	if (!vm || vm->kvm_vm_fd < 0 || vm->kvm_dirty_ring_entries)
		return -EOPNOTSUPP;
	if (vm->nr_blocks == 0 || vm->nr_blocks > GW_MAX_RAM_BLOCKS)
		return -EINVAL;
	for (unsigned i = 0; i < vm->nr_blocks; i++)
		if (!vm->blocks[i].host || vm->blocks[i].page_size_bytes != GW_PAGE_BYTES)
			return -EINVAL;
	flags = ioctl(vm->kvm_vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2);
	return flags > 0 && (flags & KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE) ? 0 : -EOPNOTSUPP;
}

static void kvm_log_stop(struct gw_dirty *d)
{
	struct kvm_log *l = d->priv;

	if (!l)
		return;
	for (unsigned i = 0; i < l->nr_blocks; i++) {
		if (l->blk[i].logging)
			(void)set_logging(d->vm, i, false);	/* nothing to undo on failure */
		free(l->blk[i].kbuf);
		gw_bitmap_free(&l->blk[i].reported);
		gw_bitmap_free(&l->blk[i].armed);
	}
	free(l->scratch);
	free(l);
	d->priv = NULL;
}

/*
 * INITIALLY_SET where KVM has it, every block can say where its holes are,
 * and most of the RAM is holes (what the files allocated, st_blocks, under
 * half their size): that is where the write-protect walk costs most against
 * what is sent. Each harvest then pays one SEEK_DATA per run of unarmed
 * pages (0.3 us here), so a RAM mostly populated, whose holes could be many
 * small runs, keeps the walk, which costs 0.3-0.7 ms per GiB once.
 */
static bool want_initially_set(const struct gw_vm_info *vm)
{
	int flags = ioctl(vm->kvm_vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2);
	uint64_t size_bytes = 0, allocated_bytes = 0;

	if (flags <= 0 || !(flags & KVM_DIRTY_LOG_INITIALLY_SET))
		return false;
	for (unsigned i = 0; i < vm->nr_blocks; i++) {
		struct stat st;

		if (vm->blocks[i].fd < 0 || fstat(vm->blocks[i].fd, &st) < 0)
			return false;
		size_bytes += vm->blocks[i].size_bytes;
		allocated_bytes += (uint64_t)st.st_blocks * 512;
	}
	return allocated_bytes < size_bytes / 2;
}

static int kvm_log_start(struct gw_dirty *d)
{
	struct kvm_enable_cap cap = {
		.cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
		.args = { KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE },
	};
	struct kvm_log *l = calloc(1, sizeof(*l));
	uint64_t max_words = 1, t0;
	int ret;

	if (!l)
		return -ENOMEM;
	d->priv = l;
	l->initially_set = want_initially_set(d->vm);
	if (l->initially_set)
		cap.args[0] |= KVM_DIRTY_LOG_INITIALLY_SET;
	if (ioctl(d->vm->kvm_vm_fd, KVM_ENABLE_CAP, &cap) < 0) {
		ret = -errno;
		goto fail;
	}
	for (unsigned i = 0; i < d->vm->nr_blocks; i++) {
		struct kvm_log_block *b = &l->blk[i];
		uint64_t words;

		b->nr_pages = d->vm->blocks[i].size_bytes / GW_PAGE_BYTES;
		words = (b->nr_pages + 63) / 64;
		max_words = words > max_words ? words : max_words;
		l->nr_blocks = i + 1;
		b->kbuf = calloc(words, sizeof(uint64_t));
		if (!b->kbuf || gw_bitmap_init(&b->reported, b->nr_pages) < 0 ||
		    (l->initially_set && gw_bitmap_init(&b->armed, b->nr_pages) < 0)) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	l->scratch = calloc(max_words, sizeof(uint64_t));
	if (!l->scratch) {
		ret = -ENOMEM;
		goto fail;
	}
	t0 = gw_now_ns();
	for (unsigned i = 0; i < l->nr_blocks; i++) {
		ret = set_logging(d->vm, i, true);
		if (ret)
			goto fail;
		l->blk[i].logging = true;
	}
	gw_log(GW_LOG_INFO, "dirty", "kvm_log_start", "slots=%u initially_set=%d enable_us=%llu",
	       l->nr_blocks, l->initially_set, (unsigned long long)((gw_now_ns() - t0) / 1000));
	return 0;
fail:
	kvm_log_stop(d);
	return ret;
}

struct arm_populated {
	struct kvm_log_block *b;
	struct gw_bitmap *out;
	ssize_t pages;
};

/* A populated run inside an unarmed one: report it, it is armed from now on. */
static int report_populated(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct arm_populated *ap = ctx;

	gw_bitmap_set_range(ap->out, first, nr_pages);
	gw_bitmap_set_range(&ap->b->reported, first, nr_pages);
	gw_bitmap_set_range(&ap->b->armed, first, nr_pages);
	ap->pages += (ssize_t)nr_pages;
	return 0;
}

/* INITIALLY_SET: the unarmed pages of block @bi that hold data now, reported. */
static ssize_t collect_unarmed(struct gw_dirty *d, unsigned bi, struct gw_bitmap *out)
{
	struct kvm_log_block *b = &((struct kvm_log *)d->priv)->blk[bi];
	struct arm_populated ap = { .b = b, .out = out };
	uint64_t pos = 0;

	while ((pos = gw_bitmap_next_clear(&b->armed, pos)) < b->nr_pages) {
		uint64_t end = gw_bitmap_next_set(&b->armed, pos);
		int ret;

		if (end > b->nr_pages)
			end = b->nr_pages;
		ret = gw_populated_ranges_in(&d->vm->blocks[bi], pos, end, report_populated, &ap);
		if (ret)
			return ret;
		pos = end;
	}
	return ap.pages;
}

static ssize_t kvm_log_collect(struct gw_dirty *d, struct gw_bitmap *out)
{
	struct kvm_log *l = d->priv;
	ssize_t total = 0;

	if (!l)
		return -EINVAL;
	for (unsigned i = 0; i < l->nr_blocks; i++) {
		struct kvm_log_block *b = &l->blk[i];
		struct kvm_dirty_log dl = { .slot = d->vm->blocks[i].kvm_slot };
		uint64_t words = (b->nr_pages + 63) / 64;

		dl.dirty_bitmap = b->kbuf;
		if (ioctl(d->vm->kvm_vm_fd, KVM_GET_DIRTY_LOG, &dl) < 0)
			return -errno;
		if (b->nr_pages % 64)		/* KVM never sets bits past the slot; be sure */
			b->kbuf[words - 1] &= (1ull << (b->nr_pages % 64)) - 1;
		for (uint64_t w = 0; w < words; w++) {
			uint64_t v = b->kbuf[w];

			if (l->initially_set)	/* an unarmed page's bit says nothing */
				v &= b->armed.words[w];
			if (!v)
				continue;
			out[i].words[w] |= v;
			/* Only the pages not reported already count: see the file's comment. */
			total += __builtin_popcountll(v & ~b->reported.words[w]);
			b->reported.words[w] |= v;
		}
		if (l->initially_set) {
			ssize_t n = collect_unarmed(d, i, &out[i]);

			if (n < 0)
				return n;
			total += n;
		}
	}
	return total;
}

static int kvm_log_clear(struct gw_dirty *d, unsigned block, uint64_t first, uint64_t count,
			 const uint64_t *mask)
{
	struct kvm_log *l = d->priv;
	struct kvm_log_block *b;
	struct kvm_clear_dirty_log cl;
	uint64_t start, end, any = 0;

	if (!l || block >= l->nr_blocks)
		return -EINVAL;
	b = &l->blk[block];
	if (first >= b->nr_pages || count > b->nr_pages - first)
		return -EINVAL;
	if (!count || (!l->initially_set && !gw_bitmap_any_in_range(&b->reported, first, count)))
		return 0;	/* nothing collect reported here, and no page is unarmed */
	start = first / 64 * 64;
	end = (first + count + 63) / 64 * 64;
	if (end > b->nr_pages)
		end = b->nr_pages;
	memset(l->scratch, 0, (end - start + 63) / 64 * sizeof(uint64_t));
	for (uint64_t i = 0; i < count; i++) {
		uint64_t p = first + i;
		bool read_now = mask[i / 64] & (1ull << (i % 64));

		if (l->initially_set && !gw_bitmap_test(&b->armed, p)) {
			if (!read_now)
				continue;	/* stays unarmed, dirty in KVM */
			gw_bitmap_set(&b->armed, p);
		} else if (!gw_bitmap_test(&b->reported, p)) {
			continue;
		}
		l->scratch[(p - start) / 64] |= 1ull << ((p - start) % 64);
		any++;
	}
	if (!any)
		return 0;
	gw_bitmap_clear_range(&b->reported, first, count);
	memset(&cl, 0, sizeof(cl));
	cl.slot = d->vm->blocks[block].kvm_slot;
	cl.first_page = start;
	cl.num_pages = (uint32_t)(end - start);
	cl.dirty_bitmap = l->scratch;
	return ioctl(d->vm->kvm_vm_fd, KVM_CLEAR_DIRTY_LOG, &cl) < 0 ? -errno : 0;
}

const struct gw_dirty_ops gw_dirty_kvm_log = {
	.name = "kvm-log",
	.id = GW_DIRTY_KVM_LOG,
	.probe = kvm_log_probe,
	.start = kvm_log_start,
	.collect = kvm_log_collect,
	.clear = kvm_log_clear,
	.stop = kvm_log_stop,
};
