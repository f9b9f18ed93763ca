/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the page pipeline's pure stages, with no socket in between,
 * move pages exactly. A batch read from source RAM (fd-backed or through
 * the mapping), classified, compressed with each codec (or auto) and framed
 * by pages_out, then checked, decompressed, planned and applied by
 * pages_in into destination RAM (fd-backed or anonymous), leaves the
 * destination's pages of the batch byte-equal to the source's; zero pages
 * are sent without data and clear a page that held data; with XBZRLE a
 * re-sent page travels as a delta and still lands exactly. The check stage
 * refuses a page outside the block, an unknown kind, XBZRLE not agreed and
 * a raw size that does not match the entries. Pages sent straight from
 * the source's mapping (live, no copy) land the same; every page carries
 * its CRC, and a page the guest changes after its CRC was taken fails its
 * check, stays out of a buffered apply, waits as a suspect until a
 * PAGES_VOID names it, and stays stale until it is sent again. auto on a
 * slow link compresses a batch that is mostly compressible even when its
 * first pages are not (its probe looks across the batch).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "codec/codec.h"
#include "pipe/pages_in.h"
#include "pipe/pages_out.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGES 512u
#define PAGE GW_PAGE_BYTES

struct ram {
	uint8_t *host;
	int fd;				/* -1: anonymous */
};

static void ram_new(struct ram *r, bool fd_backed)
{
	r->fd = fd_backed ? memfd_create("test-pages", MFD_CLOEXEC) : -1;
	TEST_ASSERT(!fd_backed || (r->fd >= 0 && ftruncate(r->fd, (off_t)PAGES * PAGE) == 0), "memfd");
	r->host = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE,
		       fd_backed ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, r->fd, 0);
	TEST_ASSERT(r->host != MAP_FAILED, "mmap");
}

static void ram_free(struct ram *r)
{
	munmap(r->host, (size_t)PAGES * PAGE);
	if (r->fd >= 0)
		close(r->fd);
}

/* Page p: zero when p % 5 == 0, text-like when odd, else pseudo-random; @gen varies it. */
static void fill(struct ram *r, uint32_t gen)
{
	for (uint64_t p = 0; p < PAGES; p++) {
		uint8_t *pg = r->host + p * PAGE;
		uint64_t x = p * 0x9e3779b97f4a7c15ull + gen;

		if (p % 5 == 0) {
			memset(pg, 0, PAGE);
			continue;
		}
		for (unsigned i = 0; i < PAGE; i += 8) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			memcpy(pg + i, p % 2 ? "godwit  " : (const char *)&x, 8);
		}
		pg[gen % PAGE] = (uint8_t)(gen + 1);
	}
}

/* One frame's payload, as the channel would send it, laid out contiguously. */
static size_t flatten(const struct gw_pages_frame *f, uint8_t *out)
{
	size_t n = 0;

	for (int i = 0; i < f->iovcnt; i++) {
		memcpy(out + n, f->iov[i].iov_base, f->iov[i].iov_len);
		n += f->iov[i].iov_len;
	}
	return n;
}

/*
 * Receive @payload as channel.c does, minus the socket: 0, the number of
 * pages that failed their CRC (recorded as suspects of frame @seq), or
 * -errno.
 */
static int receive(struct gw_pages_in *pi, const struct gw_dst_layout *l, const uint8_t *payload,
		   size_t len, uint32_t seq)
{
	struct gw_msg_pages_hdr ph;
	struct gw_pages_plan plan;
	const uint8_t *raw;
	size_t off;
	int ret, nr;

	ret = gw_msg_pages_hdr_decode(payload, (uint32_t)len, &ph);
	if (ret)
		return ret;
	TEST_CHECK(ph.flags & GW_PAGES_F_PAGE_CRC, "frames carry page CRCs");
	off = GW_PAGES_HDR_BYTES;
	memcpy(pi->entries, payload + off, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES);
	off += (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES;
	memcpy(pi->crcs, payload + off, gw_pages_crc_bytes(&ph));
	off += gw_pages_crc_bytes(&ph);
	ret = gw_pages_in_check(pi, l, &ph, &plan);
	if (ret)
		return ret;
	memcpy(pi->data, payload + off, ph.data_bytes);
	plan.direct = false;	/* no socket: the data area is in pi->data */
	ret = gw_pages_in_decompress(pi, &plan, &raw);
	if (!ret)
		ret = gw_pages_in_verify(pi, &plan, raw);
	if (!ret && plan.nr_bad)
		ret = gw_pages_in_suspect(pi, &plan, seq);
	if (ret)
		return ret;
	nr = gw_pages_in_plan_writes(pi, &plan, raw);
	ret = nr < 0 ? nr : gw_pages_in_apply(plan.blk, pi->writes, nr);
	return ret ? ret : (int)plan.nr_bad;
}

/* Send every page of @src in batches of @batch pages through a fresh pipeline pair. */
static void transfer(struct gw_pages_out *po, struct gw_pages_in *pi, const struct ram *src,
		     const struct gw_dst_layout *l, uint32_t batch, bool live, const char *what)
{
	static const uint64_t all[GW_BATCH_MASK_WORDS] = { [0 ... GW_BATCH_MASK_WORDS - 1] = ~0ULL };
	/* live: every page mapped and sent from the mapping itself; else pread / copies. */
	struct gw_ram_view view = { 0, src->host, src->fd, 0, live ? all : NULL, live };
	static uint8_t payload[GW_PAGES_HDR_BYTES + GW_WIRE_MAX_BATCH_PAGES * (8 + PAGE + 2) + 65536];

	for (uint64_t first = 0; first < PAGES; first += batch) {
		uint32_t n = PAGES - first < batch ? (uint32_t)(PAGES - first) : batch;
		struct gw_batch b = { .block = 0, .nr_pages = n, .first_page = first };
		struct gw_pages_frame f;
		int ret;

		for (uint32_t i = 0; i < n; i++)
			if ((first + i) % 7 != 3 || first == 0)	/* holes in the mask */
				b.mask[i / 64] |= 1ull << (i % 64);
		ret = gw_pages_out_build(po, (uint32_t)(first / batch), &view, &b, 0, 8.0, &f);
		TEST_ASSERT(ret == 0, "%s: build %d", what, ret);
		if (!f.iovcnt)
			continue;
		ret = receive(pi, l, payload, flatten(&f, payload), 0);
		TEST_CHECK(ret == 0, "%s: batch at %llu: %d", what, (unsigned long long)first, ret);
	}
}

/* Pages the mask sent must be equal. */
static void compare(const struct ram *src, const struct ram *dst, uint32_t batch, const char *what)
{
	for (uint64_t p = 0; p < PAGES; p++) {
		if ((p % batch) < batch && (p % 7 == 3 && p >= batch))
			continue;	/* not in the mask */
		TEST_CHECK(!memcmp(src->host + p * PAGE, dst->host + p * PAGE, PAGE), "%s: page %llu",
			   what, (unsigned long long)p);
	}
}

static void run(enum gw_codec_id codec, bool xbzrle, bool src_fd, bool dst_fd, bool live)
{
	char what[96];
	struct ram src, dst;
	struct gw_pages_out po;
	struct gw_pages_in pi;
	struct gw_dst_block blk = { 0 };
	struct gw_dst_layout l = { 1, &blk, xbzrle };

	snprintf(what, sizeof(what), "%s%s src %s%s dst %s", gw_codec_name(codec), xbzrle ? "+xbzrle" : "",
		 src_fd ? "fd" : "anon", live ? " live" : "", dst_fd ? "fd" : "anon");
	ram_new(&src, src_fd);
	ram_new(&dst, dst_fd);
	blk = (struct gw_dst_block){ .host = dst.host, .fd = dst.fd, .nr_pages = PAGES };
	TEST_ASSERT(gw_bitmap_init(&blk.written, PAGES) == 0 && gw_bitmap_init(&blk.stale, PAGES) == 0,
		    "bitmap");
	TEST_ASSERT(gw_pages_out_init(&po, codec, 0, xbzrle ? (size_t)PAGES * PAGE : 0) == 0, "out init");
	TEST_ASSERT(gw_pages_in_init(&pi) == 0, "in init");
	/* Generation 1, then a rewrite (deltas with XBZRLE; zero pages clear data). */
	for (uint32_t gen = 1; gen <= 2; gen++) {
		fill(&src, gen);
		if (gen == 2)
			for (uint64_t p = 1; p < PAGES; p += 11)
				memset(src.host + p * PAGE, 0, PAGE);	/* data -> zero */
		transfer(&po, &pi, &src, &l, gen == 1 ? 64 : 100, live, what);
		compare(&src, &dst, gen == 1 ? 64 : 100, what);
	}
	gw_pages_out_release(&po);
	gw_pages_in_release(&pi);
	gw_bitmap_free(&blk.written);
	gw_bitmap_free(&blk.stale);
	ram_free(&src);
	ram_free(&dst);
}

/*
 * A page written after its CRC was taken and before the "kernel" copied it
 * (here: before flatten): the destination sees a mismatch, does not fail,
 * keeps the page as a suspect and stale; PAGES_VOID clears the suspect; a
 * correct resend clears stale. Without the VOID the suspect stays (the
 * channel fails at CHAN_END). A copied batch (codec) is immune: its CRC is
 * over the copy.
 */
static void test_changed_while_sent(bool src_fd)
{
	static const uint64_t all[GW_BATCH_MASK_WORDS] = { [0 ... GW_BATCH_MASK_WORDS - 1] = ~0ULL };
	static uint8_t payload[GW_PAGES_HDR_BYTES + GW_WIRE_MAX_BATCH_PAGES * (12 + PAGE + 2) + 65536];
	struct ram src, dst;
	struct gw_pages_out po;
	struct gw_pages_in pi;
	struct gw_dst_block blk = { 0 };
	struct gw_dst_layout l = { 1, &blk, false };
	struct gw_ram_view view;
	struct gw_batch b = { .block = 0, .nr_pages = 64, .first_page = 0 };
	struct gw_msg_pages_void v = { .block = 0, .seq = 7, .count = 1, .pages = { 3 } };
	struct gw_pages_frame f;
	int ret;

	ram_new(&src, src_fd);
	ram_new(&dst, true);
	view = (struct gw_ram_view){ 0, src.host, src.fd, 0, all, true };
	blk = (struct gw_dst_block){ .host = dst.host, .fd = dst.fd, .nr_pages = PAGES };
	TEST_ASSERT(gw_bitmap_init(&blk.written, PAGES) == 0 && gw_bitmap_init(&blk.stale, PAGES) == 0, "bitmap");
	TEST_ASSERT(gw_pages_out_init(&po, GW_CODEC_NONE, 0, 0) == 0 && gw_pages_in_init(&pi) == 0, "init");
	fill(&src, 1);
	b.mask[0] = ~0ULL;
	TEST_ASSERT(gw_pages_out_build(&po, 0, &view, &b, 0, 0, &f) == 0 && f.iovcnt, "build");
	TEST_CHECK(po.buf[0].nr_live == f.nr_normal && po.buf[0].nr_live > 0 && (po.buf[0].live[0] >> 3 & 1),
		   "live pages: %u of %u normal", po.buf[0].nr_live, f.nr_normal);
	src.host[3 * PAGE + 100] ^= 0xff;	/* the guest writes page 3 during the send */
	ret = receive(&pi, &l, payload, flatten(&f, payload), 7);
	TEST_CHECK(ret == 1, "one page failed its CRC: %d", ret);
	TEST_CHECK(pi.nr_pending == 1 && pi.pending[0].page == 3 && pi.pending[0].seq == 7, "suspect recorded");
	TEST_CHECK(gw_bitmap_test(&blk.stale, 3), "page 3 stale");
	TEST_CHECK(memcmp(dst.host + 3 * PAGE, src.host + 3 * PAGE, PAGE), "suspect page not applied");
	TEST_CHECK(!memcmp(dst.host + 5 * PAGE, src.host + 5 * PAGE, PAGE), "its neighbours applied");
	v.seq = 6;
	TEST_CHECK(gw_pages_in_void(&pi, &l, &v) == 0 && pi.nr_pending == 1, "a VOID of another frame leaves it");
	v.seq = 7;
	TEST_CHECK(gw_pages_in_void(&pi, &l, &v) == 0 && pi.nr_pending == 0, "the VOID clears the suspect");
	v.pages[0] = PAGES;
	TEST_CHECK(gw_pages_in_void(&pi, &l, &v) == -EPROTO, "a VOID outside the block is refused");
	/* The next round sends it again (the tracker saw the write): no longer stale. */
	TEST_ASSERT(gw_pages_out_build(&po, 1, &view, &b, 1, 0, &f) == 0, "build again");
	TEST_CHECK(receive(&pi, &l, payload, flatten(&f, payload), 8) == 0, "resend checks");
	TEST_CHECK(!gw_bitmap_test(&blk.stale, 3), "page 3 no longer stale");
	TEST_CHECK(!memcmp(dst.host, src.host, 64 * PAGE), "all 64 pages equal");
	gw_pages_out_release(&po);
	gw_pages_in_release(&pi);
	gw_bitmap_free(&blk.written);
	gw_bitmap_free(&blk.stale);
	ram_free(&src);
	ram_free(&dst);
}

/*
 * auto's probe: a batch whose first pages are random but whose others are
 * text-like is compressed. After the forced samples (batches 0 and 1),
 * batch 2 is decided by the probe; a probe of the batch's first pages only
 * saw random data and sent the whole batch raw.
 */
static void test_auto_probe_spread(void)
{
	struct ram src;
	struct gw_pages_out po;
	struct gw_ram_view view;
	struct gw_batch b = { .block = 0, .nr_pages = 64, .first_page = 0, .mask = { ~0ULL } };
	struct gw_pages_frame f;
	uint64_t x = 42;

	ram_new(&src, true);
	for (uint64_t p = 0; p < 64; p++)
		for (unsigned i = 0; i < PAGE; i += 8) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			memcpy(src.host + p * PAGE + i, p < 8 ? (const char *)&x : "godwit  ", 8);
		}
	view = (struct gw_ram_view){ 0, src.host, src.fd, 0, NULL, false };
	TEST_ASSERT(gw_pages_out_init(&po, GW_CODEC_AUTO, 0, 0) == 0, "init");
	for (uint32_t n = 0; n < 3; n++)
		TEST_ASSERT(gw_pages_out_build(&po, 0, &view, &b, 0, 8.0, &f) == 0 && f.iovcnt, "build %u", n);
	TEST_CHECK(f.ph.codec != GW_WIRE_CODEC_NONE && f.data_bytes < f.raw_bytes / 2,
		   "auto sent a batch of 56 text pages behind 8 random ones raw (%zu of %zu bytes)",
		   (size_t)f.data_bytes, (size_t)f.raw_bytes);
	gw_pages_out_release(&po);
	ram_free(&src);
}

/* The check stage refuses what the layout does not allow. */
static void test_check_refusals(void)
{
	struct gw_pages_in pi;
	struct gw_dst_block blk = { .host = NULL, .fd = -1, .nr_pages = 16 };
	struct gw_dst_layout l = { 1, &blk, false };
	struct gw_msg_pages_hdr ph = { .block = 0, .nr_entries = 1, .raw_bytes = PAGE, .data_bytes = PAGE };
	struct gw_pages_plan plan;

	TEST_ASSERT(gw_pages_in_init(&pi) == 0, "init");
	gw_le64_put((uint8_t *)pi.entries, gw_page_entry(16, GW_PAGE_NORMAL));
	TEST_CHECK(gw_pages_in_check(&pi, &l, &ph, &plan) == -ERANGE, "page past the block");
	gw_le64_put((uint8_t *)pi.entries, gw_page_entry(3, 9));
	TEST_CHECK(gw_pages_in_check(&pi, &l, &ph, &plan) == -EPROTO, "unknown kind");
	gw_le64_put((uint8_t *)pi.entries, gw_page_entry(3, GW_PAGE_XBZRLE));
	TEST_CHECK(gw_pages_in_check(&pi, &l, &ph, &plan) == -EPROTO, "XBZRLE not agreed");
	gw_le64_put((uint8_t *)pi.entries, gw_page_entry(3, GW_PAGE_NORMAL));
	ph.raw_bytes = ph.data_bytes = PAGE - 1;
	TEST_CHECK(gw_pages_in_check(&pi, &l, &ph, &plan) == -EPROTO, "raw size short of the pages");
	ph.raw_bytes = ph.data_bytes = PAGE;
	ph.block = 1;
	TEST_CHECK(gw_pages_in_check(&pi, &l, &ph, &plan) == -EPROTO, "block out of layout");
	ph.block = 0;
	TEST_CHECK(gw_pages_in_check(&pi, &l, &ph, &plan) == 0 && plan.direct, "valid, received in place");
	gw_pages_in_release(&pi);
}

int main(void)
{
	static const enum gw_codec_id codecs[] = { GW_CODEC_NONE, GW_CODEC_ZSTD, GW_CODEC_LZ4,
						   GW_CODEC_ZLIB, GW_CODEC_ISAL, GW_CODEC_AUTO };

	for (size_t c = 0; c < sizeof(codecs) / sizeof(codecs[0]); c++) {
		if (codecs[c] != GW_CODEC_AUTO && !gw_codec_get(codecs[c]))
			continue;
		for (unsigned m = 0; m < 8; m++)
			run(codecs[c], false, m & 1, m & 2, m & 4);
	}
	run(GW_CODEC_NONE, true, true, true, false);
	run(GW_CODEC_NONE, true, true, true, true);
	run(GW_CODEC_ZSTD, true, false, false, true);
	test_changed_while_sent(true);
	test_changed_while_sent(false);
	test_check_refusals();
	test_auto_probe_spread();
	TEST_EXIT();
}
