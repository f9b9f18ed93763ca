/* SPDX-License-Identifier: MIT */
/*
 * The workload check: with the vCPUs parked, every page of the working set
 * must hold what the workload's invariant says its vCPU's cursors and
 * generations imply (soft_run_expected_gen: generation gen before the
 * cursor, gen-1 after it, generation 0 the initial fill; a free balloon
 * page is not looked at). verify and balloon write vmm_verify_page(page,
 * gen); dirty writes vmm_dirty_page() (over the fill with pattern=byte).
 * The first page that differs is reported, and said to be a hole when it
 * was never populated (a page lost on the way, not one written wrong).
 *
 * Threads: runs on the caller's thread, which holds the VM's ctl or is the
 * post-check thread; it only reads the RAM and the vCPUs' cursors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fill.h"
#include "soft/soft_internal.h"

/*
 * Page reader for the check: fd-backed blocks are read with pread() in
 * 256 KiB windows. In this nested VM the first user-mode touch of a page
 * through a mapping costs microseconds (~4 s/GiB) while pread costs
 * ~0.25 s/GiB; the destination's check is the guest's first work after
 * resume (the post-check thread), so it delays the guest's progress.
 * pread of a hole returns zeros without populating it.
 */
#define CHECK_WINDOW_PAGES 64u

struct page_reader {
	const struct soft_vm *vm;
	uint8_t *buf;			/* CHECK_WINDOW_PAGES pages */
	uint64_t first, count;		/* global pages held in buf */
};

static const uint8_t *page_read(struct page_reader *r, uint64_t page, uint64_t slice_end)
{
	const struct soft_vm *vm = r->vm;
	const struct gw_ram_block *b;
	uint64_t in_block, n;
	size_t done = 0, len;
	unsigned bi;

	if (page >= r->first && page < r->first + r->count)
		return r->buf + (page - r->first) * SOFT_PAGE_BYTES;
	bi = soft_block_of(vm, page);
	b = &vm->base.info.blocks[bi];
	in_block = page - vm->block_first_page[bi];
	if (b->fd < 0)
		return soft_page_ptr(vm, page);
	n = vm->block_first_page[bi + 1] - page;
	if (n > slice_end - page)
		n = slice_end - page;
	if (n > CHECK_WINDOW_PAGES)
		n = CHECK_WINDOW_PAGES;
	len = n * SOFT_PAGE_BYTES;
	while (done < len) {
		ssize_t got = pread(b->fd, r->buf + done, len - done,
				    (off_t)(b->fd_offset_bytes + in_block * SOFT_PAGE_BYTES + done));

		if (got <= 0)
			break;
		done += (size_t)got;
	}
	if (done < len) {
		r->count = 0;
		return soft_page_ptr(vm, page);	/* odd file: use the mapping */
	}
	r->first = page;
	r->count = n;
	return r->buf;
}

/*
 * Whether global page @page was never populated: a hole in its block's fd
 * (soft RAM is fd-backed). Asked only for a page that failed the check.
 */
static bool page_is_hole(const struct soft_vm *vm, uint64_t page)
{
	unsigned bi = soft_block_of(vm, page);
	const struct gw_ram_block *b = &vm->base.info.blocks[bi];
	off_t at = (off_t)(b->fd_offset_bytes + (page - vm->block_first_page[bi]) * SOFT_PAGE_BYTES);
	off_t data;

	if (b->fd < 0)
		return false;
	data = lseek(b->fd, at, SEEK_DATA);
	if (data < 0)
		return errno == ENXIO;	/* no data at or after the page */
	return data >= at + (off_t)SOFT_PAGE_BYTES;
}

static void describe_mismatch(const struct soft_vm *vm, const struct soft_vcpu *v, uint64_t off,
			      uint64_t exp_gen, const uint8_t *found, const uint8_t *exp,
			      char *msg, size_t len)
{
	uint64_t page = v->first_page + off, fw[2];
	unsigned at = 0;

	if (page_is_hole(vm, page)) {
		snprintf(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			 "): expected %s, found a never-populated page (zeros)",
			 page, v->index, v->cursor, v->gen,
			 exp_gen ? "generation data" : "initial fill content");
		return;
	}
	while (at < SOFT_PAGE_BYTES && found[at] == exp[at])
		at++;
	memcpy(fw, found, sizeof(fw));
	if (exp_gen && vm->base.wl.kind == VMM_WL_DIRTY)
		snprintf(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			 "): expected the dirty workload's generation %" PRIu64 " content, found %#" PRIx64
			 " in the word at byte %u, expected %#" PRIx64, page, v->index, v->cursor, v->gen,
			 exp_gen, ((const uint64_t *)found)[at / 8], at / 8 * 8, ((const uint64_t *)exp)[at / 8]);
	else if (exp_gen)
		snprintf(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			 "): expected index=%" PRIu64 " gen=%" PRIu64 ", found index=%" PRIu64
			 " gen=%" PRIu64 ", first difference at byte %u",
			 page, v->index, v->cursor, v->gen, page, exp_gen, fw[0], fw[1], at);
	else
		snprintf(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			 "): expected the initial %s fill (generation 0), found index=%" PRIu64
			 " gen=%" PRIu64 ", first difference at byte %u",
			 page, v->index, v->cursor, v->gen, vmm_fill_name(vm->init_fill),
			 fw[0], fw[1], at);
}

/*
 * What page @off of @v's slice must hold after generation @g wrote it (0:
 * the initial fill), in @exp. false when that is not known (the initial
 * content came from a pre-existing file).
 */
static bool expected_page(const struct soft_vm *vm, const struct soft_vcpu *v, uint64_t off,
			  uint64_t g, uint8_t *exp)
{
	uint64_t page = v->first_page + off;
	bool whole = vm->base.wl.pattern_page;

	if (g && vm->base.wl.kind != VMM_WL_DIRTY) {
		vmm_verify_page(page, g, (uint64_t *)exp);
		return true;
	}
	if (!(g && whole)) {	/* the fill shows through */
		if (!vm->init_known)
			return false;
		vmm_fill_page(vm->init_fill, vm->init_seed, page, exp);
	}
	vmm_dirty_page(off, g, whole, 1, (uint64_t *)exp);
	return true;
}

/* One vCPU's slice. 0, or -EIO with the first bad page in @msg; *@checked counts pages. */
static int check_slice(const struct soft_vm *vm, const struct soft_vcpu *v,
		       struct page_reader *rd, uint8_t *exp, uint64_t *checked, char *msg,
		       size_t len)
{
	for (uint64_t off = 0; off < v->nr_pages; off++) {
		uint64_t page = v->first_page + off;
		int64_t want = soft_run_expected_gen(vm, v, off);
		uint64_t g = (uint64_t)want;
		const uint8_t *found;

		if (want < 0)
			continue;	/* free (balloon): its content does not matter */
		if (!expected_page(vm, v, off, g, exp))
			continue;	/* initial content unknown (pre-existing file) */
		(*checked)++;
		found = page_read(rd, page, v->first_page + v->nr_pages);
		if (memcmp(found, exp, SOFT_PAGE_BYTES)) {
			describe_mismatch(vm, v, off, g, found, exp, msg, len);
			return -EIO;
		}
	}
	return 0;
}

int soft_check_verify(const struct soft_vm *vm, char *msg, size_t msg_len)
{
	uint8_t *exp = aligned_alloc(64, SOFT_PAGE_BYTES);
	struct page_reader rd = { .vm = vm };
	uint64_t checked = 0;
	int ret = 0;

	rd.buf = aligned_alloc(SOFT_PAGE_BYTES, CHECK_WINDOW_PAGES * SOFT_PAGE_BYTES);
	if (!exp || !rd.buf)
		ret = -ENOMEM;
	for (unsigned i = 0; i < vm->base.nr_vcpus && ret == 0; i++)
		ret = check_slice(vm, &vm->vcpus[i], &rd, exp, &checked, msg, msg_len);
	if (ret == 0)
		snprintf(msg, msg_len, "%" PRIu64 " pages checked", checked);
	free(rd.buf);
	free(exp);
	return ret;
}
