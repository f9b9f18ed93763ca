/* SPDX-License-Identifier: MIT */
/*
 * The destination's page stage (pages_in.c): check, receive (a direct plan
 * into RAM, or the buffer), decompress, plan the writes, apply, on one
 * hostile PAGES payload. Guest RAM is two blocks: block 0 anonymous with an
 * inaccessible page on each side (a write outside it crashes), block 1
 * fd-backed (pwrite) of the same size. Input: byte 0 = flags (bit 0: XBZRLE
 * allowed), then the PAGES payload (sub-header, entries, data area).
 * Invariants: nothing but 0 or a refusal (-EPROTO, -ERANGE, -EUCLEAN,
 * -EOPNOTSUPP) comes back; a direct plan's iovec covers exactly the data
 * area, inside block 0; no write lands outside RAM.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fuzz.h"
#include "pipe/pages_in.h"

#define PAGES 16
#define PAGE GW_PAGE_BYTES

static struct gw_pages_in pi;
static struct gw_dst_block blk[2];
static uint8_t *ram0;		/* guard | PAGES pages | guard */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	uint8_t *map = mmap(NULL, (PAGES + 2) * PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = memfd_create("fuzz-ram", MFD_CLOEXEC);

	(void)argc, (void)argv;
	fuzz_check(map != MAP_FAILED && fd >= 0 && !ftruncate(fd, PAGES * PAGE), "RAM");
	fuzz_check(!mprotect(map, PAGE, PROT_NONE) && !mprotect(map + (PAGES + 1) * PAGE, PAGE, PROT_NONE),
		   "guards");
	ram0 = map + PAGE;
	blk[0] = (struct gw_dst_block){ .host = ram0, .fd = -1, .nr_pages = PAGES };
	blk[1] = (struct gw_dst_block){ .host = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
					.fd = fd, .nr_pages = PAGES };
	fuzz_check(blk[1].host != MAP_FAILED, "fd RAM mapping");
	for (int i = 0; i < 2; i++)
		fuzz_check(!gw_bitmap_init(&blk[i].written, PAGES), "bitmaps");
	fuzz_check(!gw_pages_in_init(&pi), "pages_in");
	return 0;
}

/* The data area into RAM through a direct plan's iovec, as recv_data() would. */
static void receive_direct(const struct gw_pages_plan *plan, const uint8_t *data, size_t len)
{
	struct iovec iov[64];
	uint32_t next = 0;
	size_t at = 0;
	int cnt;

	while ((cnt = gw_pages_in_direct_iov(&pi, plan, &next, iov, 64)) > 0) {
		for (int i = 0; i < cnt; i++) {
			uint8_t *p = iov[i].iov_base;

			fuzz_check(p >= ram0 && p + iov[i].iov_len <= ram0 + PAGES * PAGE, "direct iovec inside RAM");
			fuzz_check(at + iov[i].iov_len <= len, "direct iovec within the data area");
			memcpy(p, data + at, iov[i].iov_len);
			at += iov[i].iov_len;
		}
	}
	fuzz_check(at == len, "direct iovec covers the data area exactly");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_dst_layout l = { .nr_blocks = 2, .blocks = blk };
	struct gw_msg_pages_hdr ph;
	struct gw_pages_plan plan;
	const uint8_t *raw = NULL, *area;
	int ret, nr;

	if (size < 1 + GW_PAGES_HDR_BYTES || size - 1 > gw_msg_max_payload(GW_MSG_PAGES))
		return 0;
	l.xbzrle = data[0] & 1;
	data++, size--;
	if (gw_msg_pages_hdr_decode(data, (uint32_t)size, &ph))
		return 0;
	memcpy(pi.entries, data + GW_PAGES_HDR_BYTES, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES);
	area = data + GW_PAGES_HDR_BYTES + (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES;
	ret = gw_pages_in_check(&pi, &l, &ph, &plan);
	fuzz_check(!ret || ret == -EPROTO || ret == -ERANGE, "check result");
	if (ret)
		return 0;
	if (plan.direct) {
		receive_direct(&plan, area, ph.data_bytes);
	} else {
		fuzz_check(ph.data_bytes <= pi.data_cap, "data area fits the buffer");
		memcpy(pi.data, area, ph.data_bytes);
	}
	ret = gw_pages_in_decompress(&pi, &plan, &raw);
	fuzz_check(!ret || ret == -EUCLEAN || ret == -EOPNOTSUPP, "decompress result");
	if (ret)
		return 0;
	nr = gw_pages_in_plan_writes(&pi, &plan, plan.direct ? NULL : raw);
	fuzz_check(nr >= 0 || nr == -EPROTO, "plan result");
	if (nr < 0)
		return 0;
	ret = gw_pages_in_apply(plan.blk, pi.writes, nr);
	fuzz_check(!ret || ret == -EUCLEAN, "apply result");
	return 0;
}
