/* SPDX-License-Identifier: MIT */
/*
 * Guest progress and the host's verify check, both read from guest memory:
 * the guests keep their counters and their verify position in their vCPU
 * areas (guest_abi.h), which migrate with the RAM.
 *
 * The check (vCPUs parked or not started; under postcopy only once every
 * page arrived) reads the working set with pread() from the block's memfd
 * (first touches of a mapping are slow on nested hosts) and compares every page with what the invariant of
 * guest_abi.h allows: generation gen before the cursor, gen or gen - 1 word
 * by word at the cursor, gen - 1 after it, the --fill content for
 * generation 0. The verify guest writes vmm_verify_page(page, gen), the
 * dirty guest vmm_dirty_page() (over the fill with pattern=byte).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "content.h"
#include "fill.h"
#include "kvm/kvm_internal.h"

#define CHECK_WINDOW_PAGES 256u		/* 1 MiB per pread */
#define WORDS (GW_PAGE_BYTES / 8)

/*
 * A counter of a vCPU area read through block "sys"'s fd: under postcopy a
 * read through the mapping of a page not there yet would wait for it (for
 * ever while the link is down, and status callers hold locks). The fd sees
 * the page cache: the live counter once the page arrived, the copy precopy
 * sent before that (a lower value, never a wrong one). 0 on a failed read.
 */
static uint64_t area_counter_fd(const struct kvm_vm *vm, unsigned i, size_t field_off)
{
	const struct gw_ram_block *b = &vm->base.info.blocks[KVM_BLOCK_SYS];
	uint64_t v = 0;
	off_t at = (off_t)(b->fd_offset_bytes + GW_GUEST_VCPU_AREA_GPA + i * GW_VCPU_AREA_BYTES +
			   field_off);

	if (pread(b->fd, &v, sizeof(v), at) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

uint64_t kvm_progress(const struct kvm_vm *vm)
{
	uint64_t sum = 0;
	bool ticks = vm->base.wl.kind == VMM_WL_IDLE || !strcmp(vm->guest, "compute");
	bool via_fd = atomic_load(&((struct kvm_vm *)vm)->base.postcopy_incomplete);

	if (vm->base.info.nr_blocks <= KVM_BLOCK_SYS)
		return 0;
	for (unsigned i = 0; i < vm->base.nr_vcpus; i++) {
		const struct gw_vcpu_area *a;

		if (via_fd) {
			sum += area_counter_fd(vm, i, ticks ? offsetof(struct gw_vcpu_area, ticks) :
						      offsetof(struct gw_vcpu_area, written));
			continue;
		}
		a = kvm_vcpu_area(vm, i);
		sum += ticks ? *(const volatile uint64_t *)&a->ticks :
			       *(const volatile uint64_t *)&a->written;
	}
	return sum;
}

bool kvm_workload_checkable(const struct kvm_vm *vm)
{
	return vm->base.wl.kind == VMM_WL_VERIFY ||
	       (vm->base.wl.kind == VMM_WL_DIRTY && !strcmp(vm->guest, "dirty"));
}

/*
 * The expected page at slice offset @off (global page @page) for
 * generation @g (0: the fill), or false when unknown.
 */
static bool expected(const struct kvm_vm *vm, uint64_t page, uint64_t off, uint64_t g,
		     uint64_t *out)
{
	bool whole = vm->base.wl.pattern_page;

	if (g && vm->base.wl.kind != VMM_WL_DIRTY) {
		vmm_verify_page(page, g, out);
		return true;
	}
	if (!(g && whole)) {	/* the fill shows through */
		if (!vm->init_known)
			return false;
		vmm_fill_page(vm->init_fill, vm->init_seed, page, (uint8_t *)out);
	}
	vmm_dirty_page(off, g, whole, 0, out);
	return true;
}

struct window {
	uint64_t first, count;		/* pages of the working set in buf */
	uint64_t *buf;
};

static int read_window(const struct kvm_vm *vm, struct window *w, uint64_t page, uint64_t end)
{
	const struct gw_ram_block *b = &vm->base.info.blocks[KVM_BLOCK_RAM];
	uint64_t n = end - page < CHECK_WINDOW_PAGES ? end - page : CHECK_WINDOW_PAGES;
	size_t len = n * GW_PAGE_BYTES, done = 0;

	while (done < len) {
		ssize_t got = pread(b->fd, (uint8_t *)w->buf + done, len - done,
				    (off_t)(b->fd_offset_bytes + page * GW_PAGE_BYTES + done));

		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO;
		done += (size_t)got;
	}
	w->first = page;
	w->count = n;
	return 0;
}

/* Page @off of vCPU @i's slice against generations (gen, gen - 1 at the cursor). */
static bool page_ok(const struct kvm_vm *vm, const uint64_t *found, uint64_t page, uint64_t off,
		    uint64_t g, bool at_cursor, uint64_t *exp, uint64_t *alt)
{
	bool have_alt;

	if (!expected(vm, page, off, g, exp))
		return true;		/* content unknown: nothing to compare */
	if (!at_cursor)
		return memcmp(found, exp, GW_PAGE_BYTES) == 0;
	have_alt = expected(vm, page, off, g - 1, alt);
	if (!have_alt)
		return true;		/* half written over unknown content */
	for (unsigned k = 0; k < WORDS; k++)
		if (found[k] != exp[k] && found[k] != alt[k])
			return false;
	return true;
}

static int check_slice(const struct kvm_vm *vm, unsigned i, struct window *w, uint64_t *exp,
		       uint64_t *alt, uint64_t *checked, char *msg, size_t msg_len)
{
	const struct gw_vcpu_area *a = kvm_vcpu_area(vm, i);
	uint64_t first = a->first_page, n = a->nr_pages, t = a->written;
	uint64_t cursor = n ? t % n : 0, gen = n ? t / n + 1 : 1;
	int ret;

	if (first > vm->base.ram_pages || n > vm->base.ram_pages - first) {
		kvm_why(msg, msg_len, "vCPU %u: slice [%" PRIu64 ", +%" PRIu64 ") outside RAM", i, first, n);
		return -EIO;
	}
	for (uint64_t off = 0; off < n; off++) {
		uint64_t page = first + off, g = off <= cursor ? gen : gen - 1;
		const uint64_t *found;

		if (page < w->first || page >= w->first + w->count) {
			ret = read_window(vm, w, page, first + n);
			if (ret)
				return ret;
		}
		found = w->buf + (page - w->first) * WORDS;
		(*checked)++;
		if (page_ok(vm, found, page, off, g, off == cursor, exp, alt))
			continue;
		kvm_why(msg, msg_len, "vCPU %u page %" PRIu64 " (slice offset %" PRIu64 ", cursor %" PRIu64
			", generation %" PRIu64 "): found words [0]=%#" PRIx64 " [1]=%#" PRIx64
			", expected page %" PRIu64 " generation %" PRIu64, i, page, off, cursor, g,
			found[0], found[1], page, g);
		return -EIO;
	}
	return 0;
}

int kvm_check_verify(struct kvm_vm *vm, char *msg, size_t msg_len)
{
	struct window w = { .first = 0, .count = 0 };
	uint64_t *exp = aligned_alloc(64, GW_PAGE_BYTES), *alt = aligned_alloc(64, GW_PAGE_BYTES);
	uint64_t checked = 0;
	int ret = 0;

	w.buf = aligned_alloc(GW_PAGE_BYTES, CHECK_WINDOW_PAGES * GW_PAGE_BYTES);
	if (!exp || !alt || !w.buf) {
		ret = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < vm->base.nr_vcpus && !ret; i++)
		ret = check_slice(vm, i, &w, exp, alt, &checked, msg, msg_len);
	if (!ret)
		kvm_why(msg, msg_len, "%" PRIu64 " pages checked", checked);
	else if (ret != -EIO)
		kvm_why(msg, msg_len, "reading guest RAM: %s", strerror(-ret));
out:
	free(w.buf);
	free(exp);
	free(alt);
	return ret;
}
