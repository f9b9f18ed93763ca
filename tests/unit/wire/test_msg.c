/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the message decoders accept exactly the well-formed messages.
 * HELLO: a valid message round-trips; every malformed field (truncation at
 * any length, page size, channel count, flags, block count, block names,
 * sizes, gpa overflow, trailing bytes) is refused with -EPROTO and a
 * non-empty reason; with HELLO_VM its VM part (vCPU count, CPU profile)
 * round-trips, and a count of 0 or above the bound, a profile over its bound
 * or longer than the bytes left, a missing or a truncated part are refused. PAGES header: entry count, codec, raw size, codec none
 * with data != raw and a length disagreeing with the frame are refused.
 * STATE: round-trips sections byte-exact; a count over the bound, any
 * truncation, a name without NUL, a repeated name and trailing bytes are
 * refused. Every other message: encodes to exactly gw_msg_size bytes within
 * its frame bound, decodes and re-encodes to the same bytes, is refused when
 * truncated at any length, with a trailing byte, with a reserved field that
 * is not zero, or with an out-of-range field.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/state.h"
#include "wire/frame.h"
#include "wire/msg.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define HELLO_FIXED_BYTES GW_MSG_HELLO_FIXED_BYTES
#define HELLO_NR_BLOCKS_OFF (HELLO_FIXED_BYTES - 4)
#define HELLO_BLOCK_BYTES GW_MSG_HELLO_BLOCK_BYTES

static void valid_hello(struct gw_msg_hello *m, unsigned nr_blocks)
{
	memset(m, 0, sizeof(*m));
	m->min_version = 1;
	m->max_version = 1;
	for (unsigned i = 0; i < GW_WIRE_ID_BYTES; i++)
		m->id[i] = (uint8_t)(0xa0 + i);
	m->page_size_bytes = 4096;
	m->nr_channels = 4;
	m->codec = 1;
	m->codec_level = 3;
	m->flags = GW_HELLO_VERIFY | GW_HELLO_XBZRLE;
	m->batch_pages = 128;
	m->nr_blocks = nr_blocks;
	for (unsigned i = 0; i < nr_blocks; i++) {
		snprintf(m->blocks[i].name, GW_RAM_NAME_MAX, "ram%u", i);
		m->blocks[i].gpa = (uint64_t)i << 32;
		m->blocks[i].size_bytes = (uint64_t)(i + 1) << 20;
		m->blocks[i].page_size_bytes = 4096;
	}
}

static size_t enc(const struct gw_msg_hello *m, uint8_t *buf, size_t cap)
{
	struct gw_wbuf w;

	gw_wbuf_init(&w, buf, cap);
	TEST_ASSERT(gw_msg_encode(GW_MSG_HELLO, m, &w) == 0, "encode");
	return w.len;
}

static uint8_t hbuf[HELLO_FIXED_BYTES + (GW_MAX_RAM_BLOCKS + 1) * HELLO_BLOCK_BYTES + GW_MSG_HELLO_VM_BYTES +
		    GW_WIRE_MAX_PROFILE_BYTES + 64];

/* Decode must refuse @len bytes of hbuf with -EPROTO and a reason. */
static void expect_refused(size_t len, const char *what)
{
	struct gw_msg_hello *out = malloc(sizeof(*out));
	char why[200] = "";
	int ret;

	TEST_ASSERT(out, "malloc");
	ret = gw_msg_decode(GW_MSG_HELLO, hbuf, len, out, why, sizeof(why));
	TEST_CHECK(ret == -EPROTO, "%s: decode returned %d", what, ret);
	TEST_CHECK(why[0] != 0, "%s: no reason", what);
	if (getenv("GW_TEST_VERBOSE"))
		printf("%-28s -> %s\n", what, why);
	free(out);
}

/* Encode a tweaked copy of the valid HELLO and expect refusal. */
#define REFUSE_TWEAK(what, stmt) do {						\
	struct gw_msg_hello __m;						\
	valid_hello(&__m, 2);							\
	{ struct gw_msg_hello *h = &__m; stmt; }				\
	expect_refused(enc(&__m, hbuf, sizeof(hbuf)), what);			\
} while (0)

static void test_hello(void)
{
	struct gw_msg_hello m, out;
	char why[200];
	size_t len;

	/* Valid, 1 and 64 blocks. */
	for (unsigned nb = 1; nb <= GW_MAX_RAM_BLOCKS; nb += 63) {
		valid_hello(&m, nb);
		len = enc(&m, hbuf, sizeof(hbuf));
		TEST_CHECK(len == HELLO_FIXED_BYTES + nb * HELLO_BLOCK_BYTES, "length %zu", len);
		TEST_CHECK(len <= gw_frame_max_payload(GW_MSG_HELLO), "fits the HELLO bound");
		why[0] = 0;
		TEST_CHECK(gw_msg_decode(GW_MSG_HELLO, hbuf, len, &out, why, sizeof(why)) == 0, "valid: %s", why);
		TEST_CHECK(!memcmp(out.id, m.id, GW_WIRE_ID_BYTES) && out.nr_channels == 4 && out.codec == 1 &&
			   out.codec_level == 3 && out.flags == m.flags && out.batch_pages == 128 &&
			   out.nr_blocks == nb, "fields round trip");
		for (unsigned i = 0; i < nb; i++)
			TEST_CHECK(!strcmp(out.blocks[i].name, m.blocks[i].name) &&
				   out.blocks[i].gpa == m.blocks[i].gpa &&
				   out.blocks[i].size_bytes == m.blocks[i].size_bytes &&
				   out.blocks[i].page_size_bytes == 4096, "block %u round trip", i);
	}

	/* Truncated at every length. */
	valid_hello(&m, 2);
	len = enc(&m, hbuf, sizeof(hbuf));
	for (size_t cut = 0; cut < len; cut++) {
		char what[48];

		snprintf(what, sizeof(what), "truncated at %zu", cut);
		expect_refused(cut, what);
	}
	/* Trailing bytes. */
	hbuf[len] = 0;
	expect_refused(len + 1, "one trailing byte");
	expect_refused(len + HELLO_BLOCK_BYTES, "a whole extra block");

	REFUSE_TWEAK("versions 0..0", h->min_version = 0; h->max_version = 0);
	REFUSE_TWEAK("versions 2..1", h->min_version = 2);
	REFUSE_TWEAK("page size 8192", h->page_size_bytes = 8192;
		     h->blocks[0].page_size_bytes = h->blocks[1].page_size_bytes = 8192);
	REFUSE_TWEAK("page size 0", h->page_size_bytes = 0);
	REFUSE_TWEAK("0 channels", h->nr_channels = 0);
	REFUSE_TWEAK("65 channels", h->nr_channels = GW_WIRE_MAX_CHANNELS + 1);
	REFUSE_TWEAK("codec 6", h->codec = 6);
	REFUSE_TWEAK("unknown flag bit 5", h->flags |= 1u << 5);
	REFUSE_TWEAK("unknown flag bit 31", h->flags |= 1u << 31);
	REFUSE_TWEAK("batch 0", h->batch_pages = 0);
	REFUSE_TWEAK("batch 1025", h->batch_pages = GW_WIRE_MAX_BATCH_PAGES + 1);
	REFUSE_TWEAK("block page size 8192", h->blocks[1].page_size_bytes = 8192);
	REFUSE_TWEAK("empty name", h->blocks[1].name[0] = 0);
	REFUSE_TWEAK("duplicate names", strcpy(h->blocks[1].name, "ram0"));
	REFUSE_TWEAK("size 0", h->blocks[0].size_bytes = 0);
	REFUSE_TWEAK("size not page multiple", h->blocks[0].size_bytes = 4097);
	REFUSE_TWEAK("size 2^64-4096", h->blocks[0].size_bytes = UINT64_MAX - 4095);
	REFUSE_TWEAK("gpa not aligned", h->blocks[1].gpa = 0x1000800);
	REFUSE_TWEAK("gpa + size overflows", h->blocks[1].gpa = UINT64_MAX - 4095;
		     h->blocks[1].size_bytes = 8192);

	/* Block counts 0 and 65: the count field is patched in the bytes. */
	valid_hello(&m, 1);
	len = enc(&m, hbuf, sizeof(hbuf));
	hbuf[HELLO_NR_BLOCKS_OFF] = 0;
	expect_refused(HELLO_FIXED_BYTES, "0 blocks");
	expect_refused(len, "0 blocks, one block of bytes");
	valid_hello(&m, GW_MAX_RAM_BLOCKS);
	len = enc(&m, hbuf, sizeof(hbuf));
	memcpy(hbuf + len, hbuf + len - HELLO_BLOCK_BYTES, HELLO_BLOCK_BYTES);
	strcpy((char *)hbuf + len, "ram64");
	hbuf[HELLO_NR_BLOCKS_OFF] = GW_MAX_RAM_BLOCKS + 1;
	expect_refused(len + HELLO_BLOCK_BYTES, "65 blocks");

	/* A name filling all 32 bytes without a NUL. */
	valid_hello(&m, 2);
	len = enc(&m, hbuf, sizeof(hbuf));
	memset(hbuf + HELLO_FIXED_BYTES + HELLO_BLOCK_BYTES, 'A', GW_RAM_NAME_MAX);
	expect_refused(len, "name without NUL");
}

/* HELLO_VM: the vCPU count and the CPU profile after the blocks. */
static void test_hello_vm(void)
{
	struct gw_msg_hello *m = calloc(1, sizeof(*m)), *out = calloc(1, sizeof(*out));
	char why[200] = "";
	size_t len;

	TEST_ASSERT(m && out, "calloc");
	valid_hello(m, 2);
	m->flags |= GW_HELLO_VM;
	m->nr_vcpus = 3;
	len = enc(m, hbuf, sizeof(hbuf));
	TEST_CHECK(len == HELLO_FIXED_BYTES + 2 * HELLO_BLOCK_BYTES + GW_MSG_HELLO_VM_BYTES, "length %zu", len);
	TEST_CHECK(gw_msg_decode(GW_MSG_HELLO, hbuf, len, out, why, sizeof(why)) == 0, "valid: %s", why);
	TEST_CHECK(out->nr_vcpus == 3 && out->profile_bytes == 0 && out->flags == m->flags,
		   "vCPUs round trip: %u", out->nr_vcpus);
	valid_hello(m, GW_MAX_RAM_BLOCKS);
	m->flags |= GW_HELLO_VM;
	m->nr_vcpus = GW_WIRE_MAX_HELLO_VCPUS;
	m->profile_bytes = GW_WIRE_MAX_PROFILE_BYTES;
	for (unsigned i = 0; i < m->profile_bytes; i++)
		m->profile[i] = (uint8_t)(i * 7);
	len = enc(m, hbuf, sizeof(hbuf));
	TEST_CHECK(len == gw_frame_max_payload(GW_MSG_HELLO), "the largest HELLO is its bound: %zu", len);
	TEST_CHECK(gw_msg_decode(GW_MSG_HELLO, hbuf, len, out, why, sizeof(why)) == 0, "largest: %s", why);
	TEST_CHECK(out->profile_bytes == m->profile_bytes && !memcmp(out->profile, m->profile, m->profile_bytes),
		   "profile round trip");
	for (size_t cut = len - GW_MSG_HELLO_VM_BYTES - m->profile_bytes; cut < len; cut += 37)
		expect_refused(cut, "VM part truncated");
	expect_refused(len - 1, "profile one byte short");
	gw_le32_put(hbuf + len - m->profile_bytes - 4, GW_WIRE_MAX_PROFILE_BYTES + 1);
	expect_refused(len, "profile over its bound");
	REFUSE_TWEAK("VM part, 0 vCPUs", h->flags |= GW_HELLO_VM; h->nr_vcpus = 0);
	REFUSE_TWEAK("VM part, too many vCPUs", h->flags |= GW_HELLO_VM; h->nr_vcpus = GW_WIRE_MAX_HELLO_VCPUS + 1);
	/* The flag without its part: the bytes of a HELLO without it. */
	valid_hello(m, 2);
	len = enc(m, hbuf, sizeof(hbuf));
	hbuf[56] |= GW_HELLO_VM;	/* flags, at offset 56 */
	expect_refused(len, "HELLO_VM without its part");
	free(m);
	free(out);
}

static int state_decode(const void *buf, size_t len, struct gw_state *st)
{
	return gw_msg_decode(GW_MSG_STATE, buf, len, &(struct gw_msg_state){ st }, NULL, 0);
}

static void pages_enc(uint8_t *out, uint32_t block, uint32_t n, uint32_t codec,
		      uint32_t data, uint32_t raw)
{
	struct gw_msg_pages_hdr ph = { .block = block, .nr_entries = n, .round = 9,
				       .codec = codec, .data_bytes = data, .raw_bytes = raw };

	gw_msg_pages_hdr_encode(out, &ph);
}

static uint32_t frame_len(uint32_t n, uint32_t data)
{
	return GW_PAGES_HDR_BYTES + n * GW_PAGES_ENTRY_BYTES + data;
}

static void test_pages_hdr(void)
{
	uint8_t b[GW_PAGES_HDR_BYTES];
	struct gw_msg_pages_hdr ph;

	pages_enc(b, 3, 2, 0, 8192, 8192);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(2, 8192), &ph) == 0, "valid");
	TEST_CHECK(ph.block == 3 && ph.nr_entries == 2 && ph.round == 9 && ph.codec == 0 &&
		   ph.data_bytes == 8192 && ph.raw_bytes == 8192, "round trip");
	pages_enc(b, 0, 1024, 1, 100, 1024 * 4098);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1024, 100), &ph) == 0, "max batch, max raw");
	TEST_CHECK(frame_len(1024, 1024 * 4098) <= gw_frame_max_payload(GW_MSG_PAGES), "bound covers max");
	pages_enc(b, 0, 5, 0, 0, 0);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(5, 0), &ph) == 0, "zero pages only");

	pages_enc(b, 0, 0, 0, 0, 0);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(0, 0), &ph) == -EPROTO, "count 0");
	pages_enc(b, 0, 1025, 0, 0, 0);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1025, 0), &ph) == -EPROTO, "count 1025");
	pages_enc(b, 0, 0xffffffffu, 0, 0, 0);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, 24, &ph) == -EPROTO, "count 2^32-1");
	for (uint32_t codec = 5; codec < 8; codec++) {
		pages_enc(b, 0, 1, codec, 10, 4096);
		TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1, 10), &ph) == -EPROTO, "codec %u", codec);
	}
	pages_enc(b, 0, 1, 1, 10, 4099);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1, 10), &ph) == -EPROTO, "raw > n * 4098");
	pages_enc(b, 0, 1, 1, 10, 0xffffffffu);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1, 10), &ph) == -EPROTO, "raw 2^32-1");
	pages_enc(b, 0, 1, 0, 4096, 4000);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1, 4096), &ph) == -EPROTO, "none: data != raw");
	pages_enc(b, 0, 2, 0, 8192, 8192);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(2, 8192) - 1, &ph) == -EPROTO, "frame 1 short");
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(2, 8192) + 1, &ph) == -EPROTO, "frame 1 long");
	TEST_CHECK(gw_msg_pages_hdr_decode(b, frame_len(1, 8192), &ph) == -EPROTO, "entries missing");
	pages_enc(b, 0, 1, 2, 0xfffffff0u, 4096);
	TEST_CHECK(gw_msg_pages_hdr_decode(b, 0xffffffffu, &ph) == -EPROTO, "data bytes near 4 GiB");
}

static uint8_t sbuf[4 + 300 * (GW_SECTION_NAME_MAX + 8) + 4096];

static void test_state(void)
{
	struct gw_state *st = malloc(sizeof(*st)), *out = malloc(sizeof(*out));
	uint8_t data[1000];
	struct gw_wbuf w;
	size_t len;

	TEST_ASSERT(st && out, "malloc");
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	gw_state_init(st);
	TEST_ASSERT(gw_state_add(st, "cpu0", 7, data, 100) == 0, "add");
	TEST_ASSERT(gw_state_add(st, "empty", 1, NULL, 0) == 0, "add empty");
	TEST_ASSERT(gw_state_add(st, "a-name-of-thirty-one-characters", 0xffffffffu, data, 1000) == 0, "add long");
	len = gw_msg_size(GW_MSG_STATE, &(struct gw_msg_state){ st });
	TEST_CHECK(len == 4 + 3 * (GW_SECTION_NAME_MAX + 8) + 1100, "size %zu", len);
	gw_wbuf_init(&w, sbuf, sizeof(sbuf));
	TEST_ASSERT(gw_msg_encode(GW_MSG_STATE, &(struct gw_msg_state){ st }, &w) == 0 && w.len == len, "encode %zu", w.len);
	gw_state_init(out);
	TEST_CHECK(state_decode(sbuf, len, out) == 0, "decode");
	TEST_CHECK(gw_state_count(out) == 3, "count %u", gw_state_count(out));
	{
		uint32_t v;
		size_t n;
		const void *p = gw_state_find(out, "cpu0", &v, &n);

		TEST_CHECK(p && v == 7 && n == 100 && !memcmp(p, data, 100), "cpu0");
		p = gw_state_find(out, "empty", &v, &n);
		TEST_CHECK(p && v == 1 && n == 0, "empty");
		p = gw_state_find(out, "a-name-of-thirty-one-characters", &v, &n);
		TEST_CHECK(p && v == 0xffffffffu && n == 1000 && !memcmp(p, data, 1000), "long name");
	}
	gw_state_release(out);

	/* Zero sections. */
	{
		struct gw_state *z = malloc(sizeof(*z));

		TEST_ASSERT(z, "malloc");
		gw_state_init(z);
		gw_wbuf_init(&w, sbuf, sizeof(sbuf));
		gw_msg_encode(GW_MSG_STATE, &(struct gw_msg_state){ z }, &w);
		TEST_CHECK(w.len == 4 && state_decode(sbuf, 4, out) == 0 && gw_state_count(out) == 0,
			   "zero sections");
		gw_state_release(out);
		free(z);
	}

	/* Every truncation (inside the count, a name, a length, data). */
	gw_wbuf_init(&w, sbuf, sizeof(sbuf));
	gw_msg_encode(GW_MSG_STATE, &(struct gw_msg_state){ st }, &w);
	for (size_t cut = 0; cut < len; cut++) {
		TEST_CHECK(state_decode(sbuf, cut, out) == -EPROTO, "truncated at %zu", cut);
		gw_state_release(out);
	}
	TEST_CHECK(state_decode(sbuf, len + 1, out) == -EPROTO, "trailing byte");
	gw_state_release(out);

	/* A section length pointing far past the end. */
	sbuf[4 + GW_SECTION_NAME_MAX + 4 + 3] = 0x7f;
	TEST_CHECK(state_decode(sbuf, len, out) == -EPROTO, "section length 2 GiB");
	gw_state_release(out);
	gw_wbuf_init(&w, sbuf, sizeof(sbuf));
	gw_msg_encode(GW_MSG_STATE, &(struct gw_msg_state){ st }, &w);

	/* Name without NUL. */
	memset(sbuf + 4, 'N', GW_SECTION_NAME_MAX);
	TEST_CHECK(state_decode(sbuf, len, out) == -EPROTO, "name without NUL");
	gw_state_release(out);
	/* Empty name. */
	memset(sbuf + 4, 0, GW_SECTION_NAME_MAX);
	TEST_CHECK(state_decode(sbuf, len, out) == -EPROTO, "empty name");
	gw_state_release(out);
	/* Duplicate name: the second section renamed to the first. */
	gw_wbuf_init(&w, sbuf, sizeof(sbuf));
	gw_msg_encode(GW_MSG_STATE, &(struct gw_msg_state){ st }, &w);
	memset(sbuf + 4 + GW_SECTION_NAME_MAX + 8 + 100, 0, GW_SECTION_NAME_MAX);
	memcpy(sbuf + 4 + GW_SECTION_NAME_MAX + 8 + 100, "cpu0", 4);
	TEST_CHECK(state_decode(sbuf, len, out) == -EPROTO, "duplicate name");
	gw_state_release(out);

	/* Count over the bound, with and without the bytes behind it. */
	{
		uint32_t count = GW_STATE_MAX_SECTIONS + 1;
		size_t n = 4;

		memcpy(sbuf, &count, 4);
		for (uint32_t i = 0; i < count; i++) {
			memset(sbuf + n, 0, GW_SECTION_NAME_MAX + 8);
			snprintf((char *)sbuf + n, GW_SECTION_NAME_MAX, "s%u", i);
			n += GW_SECTION_NAME_MAX + 8;
		}
		TEST_CHECK(state_decode(sbuf, n, out) == -EPROTO, "257 sections");
		gw_state_release(out);
		TEST_CHECK(state_decode(sbuf, 4, out) == -EPROTO, "257 sections, no bytes");
		gw_state_release(out);
		count = 0xffffffffu;
		memcpy(sbuf, &count, 4);
		TEST_CHECK(state_decode(sbuf, n, out) == -EPROTO, "2^32-1 sections");
		gw_state_release(out);
		/* Exactly the maximum is fine. */
		count = GW_STATE_MAX_SECTIONS;
		memcpy(sbuf, &count, 4);
		TEST_CHECK(state_decode(sbuf, n - (GW_SECTION_NAME_MAX + 8), out) == 0, "256 sections");
		TEST_CHECK(gw_state_count(out) == GW_STATE_MAX_SECTIONS, "256 decoded");
		gw_state_release(out);
	}
	gw_state_release(st);
	free(st);
	free(out);
}


/* ---- every other message ---- */

static struct gw_extent ext_ok[3] = { { 0, 1 }, { 10, 5 }, { 1ull << 40, 1ull << 20 } };

struct msg_case {
	const char *name;
	uint16_t type;
	union gw_msg m;
	int reserved_off;		/* offset of a reserved le32, -1 when none */
};

static void fill_cases(struct msg_case *c, unsigned *n)
{
	unsigned i = 0;

	memset(c, 0, 20 * sizeof(*c));
	c[i] = (struct msg_case){ "HELLO_ACK", GW_MSG_HELLO_ACK, .reserved_off = -1 };
	c[i].m.hello_ack = (struct gw_msg_hello_ack){ 1, GW_HELLO_VERIFY | GW_HELLO_XBZRLE, { 0 }, { 0 } };
	memset(c[i].m.hello_ack.boot_id, 0xb0, GW_WIRE_ID_BYTES);
	memset(c[i].m.hello_ack.challenge, 0xc4, GW_WIRE_ID_BYTES);
	i++;
	c[i] = (struct msg_case){ "CHAN_HELLO", GW_MSG_CHAN_HELLO, .reserved_off = -1 };
	memset(c[i].m.chan_hello.id, 0x5c, GW_WIRE_ID_BYTES);
	c[i].m.chan_hello.index = 63;
	memset(c[i].m.chan_hello.challenge, 0xc5, GW_WIRE_ID_BYTES);
	i++;
	c[i] = (struct msg_case){ "CHAN_ACK", GW_MSG_CHAN_ACK, .reserved_off = -1 };
	c[i].m.chan_ack.index = 7;
	i++;
	c[i] = (struct msg_case){ "EXTENTS", GW_MSG_EXTENTS, .reserved_off = -1 };
	c[i].m.extents = (struct gw_msg_extents){ .block = 3, .count = 3, .ext = ext_ok };
	i++;
	c[i] = (struct msg_case){ "ROUND", GW_MSG_ROUND, .reserved_off = 4 };
	c[i].m.round = (struct gw_msg_round){ 0xfffffffeu, 1ull << 50 };
	i++;
	c[i] = (struct msg_case){ "CHAN_END", GW_MSG_CHAN_END, .reserved_off = 4 };
	c[i].m.chan_end = (struct gw_msg_chan_end){ 5, 123456789, 987654321012ull };
	i++;
	c[i] = (struct msg_case){ "COMPLETE", GW_MSG_COMPLETE, .reserved_off = 4 };
	c[i].m.complete = (struct gw_msg_complete){ 64, 0, 1ull << 33 };
	i++;
	c[i] = (struct msg_case){ "READY", GW_MSG_READY, .reserved_off = -1 };
	c[i].m.ready = (struct gw_msg_ready){ 1234567 };
	i++;
	c[i] = (struct msg_case){ "GO", GW_MSG_GO, .reserved_off = -1 };
	i++;
	c[i] = (struct msg_case){ "RESUMED", GW_MSG_RESUMED, .reserved_off = -1 };
	c[i].m.resumed = (struct gw_msg_resumed){ 424242, 1ull << 45 };
	i++;
	c[i] = (struct msg_case){ "ERROR", GW_MSG_ERROR, .reserved_off = -1 };
	c[i].m.error.code = GW_WERR_STATE;
	strcpy(c[i].m.error.reason, "device state refused: cpuid differs");
	i++;
	c[i] = (struct msg_case){ "FDS", GW_MSG_FDS, .reserved_off = -1 };
	c[i].m.fds.count = 3;
	for (uint32_t k = 0; k < 3; k++)
		c[i].m.fds.block[k] = k;
	i++;
	c[i] = (struct msg_case){ "VERIFY", GW_MSG_VERIFY, .reserved_off = -1 };
	c[i].m.verify = (struct gw_msg_verify){ 0x0123456789abcdefull, 0xfedcba9876543210ull, 77 };
	i++;
	c[i] = (struct msg_case){ "VERIFIED", GW_MSG_VERIFIED, .reserved_off = 4 };
	c[i].m.verified = (struct gw_msg_verified){ GW_VERIFIED_MATCH, 1, 2, 3, 4 };
	i++;
	c[i] = (struct msg_case){ "PING", GW_MSG_PING, .reserved_off = -1 };
	c[i].m.ping.token = 0x1122334455667788ull;
	i++;
	c[i] = (struct msg_case){ "PONG", GW_MSG_PONG, .reserved_off = -1 };
	c[i].m.ping.token = 99;
	i++;
	*n = i;
}

static size_t msg_enc(uint16_t type, const void *m, uint8_t *buf, size_t cap)
{
	struct gw_wbuf w;

	gw_wbuf_init(&w, buf, cap);
	TEST_ASSERT(gw_msg_encode(type, m, &w) == 0, "encode %s", gw_frame_type_name(type));
	return w.len;
}

/* Decoded @out re-encodes to the bytes @a (EXTENTS through its accessor). */
static void check_reencode(const struct msg_case *c, union gw_msg *out, const uint8_t *a, size_t len)
{
	struct gw_extent ext[3];
	uint8_t b[1024];

	if (c->type == GW_MSG_EXTENTS) {
		TEST_CHECK(out->extents.block == 3 && out->extents.count == 3, "EXTENTS fields");
		for (uint32_t k = 0; k < 3; k++) {
			ext[k] = gw_msg_extents_get(&out->extents, k);
			TEST_CHECK(ext[k].first_page == ext_ok[k].first_page &&
				   ext[k].nr_pages == ext_ok[k].nr_pages, "EXTENTS range %u", k);
		}
		out->extents.ext = ext;
	}
	TEST_CHECK(msg_enc(c->type, out, b, sizeof(b)) == len && !memcmp(a, b, len),
		   "%s re-encodes to the same bytes", c->name);
}

static void test_msg_case(const struct msg_case *c)
{
	uint8_t a[1024];
	union gw_msg out;
	size_t len = msg_enc(c->type, &c->m, a, sizeof(a));

	TEST_CHECK(len == gw_msg_size(c->type, &c->m), "%s size %zu", c->name, len);
	TEST_CHECK(len <= gw_frame_max_payload(c->type), "%s within its bound", c->name);
	TEST_CHECK(gw_msg_decode(c->type, a, len, &out, NULL, 0) == 0, "%s decodes", c->name);
	check_reencode(c, &out, a, len);
	for (size_t cut = 0; cut < len; cut++)
		TEST_CHECK(gw_msg_decode(c->type, a, cut, &out, NULL, 0) == -EPROTO,
			   "%s truncated at %zu", c->name, cut);
	a[len] = 0;
	TEST_CHECK(gw_msg_decode(c->type, a, len + 1, &out, NULL, 0) == -EPROTO, "%s trailing byte", c->name);
	if (c->reserved_off >= 0) {
		a[c->reserved_off + 2] = 1;
		TEST_CHECK(gw_msg_decode(c->type, a, len, &out, NULL, 0) == -EPROTO,
			   "%s reserved field set", c->name);
	}
}

/* Encode @m as @type, patch one le32 at @off (or none: off < 0), expect refusal. */
static void refuse_msg(const char *what, uint16_t type, const void *m, int off, uint32_t v)
{
	uint8_t a[1024];
	union gw_msg out;
	char why[160] = "";
	size_t len = msg_enc(type, m, a, sizeof(a));

	if (off >= 0)
		gw_le32_put(a + off, v);
	TEST_CHECK(gw_msg_decode(type, a, len, &out, why, sizeof(why)) == -EPROTO, "%s refused", what);
	TEST_CHECK(why[0], "%s: a reason", what);
}

static void test_messages(void)
{
	struct msg_case c[20];
	unsigned n;

	fill_cases(c, &n);
	for (unsigned i = 0; i < n; i++)
		test_msg_case(&c[i]);
	refuse_msg("HELLO_ACK flag bit 9", GW_MSG_HELLO_ACK, &c[0].m, 4, 1u << 9);
	refuse_msg("CHAN_HELLO index 64", GW_MSG_CHAN_HELLO, &c[1].m, GW_WIRE_ID_BYTES, 64);
	refuse_msg("EXTENTS block 64", GW_MSG_EXTENTS, &c[3].m, 0, GW_MAX_RAM_BLOCKS);
	refuse_msg("EXTENTS count 0", GW_MSG_EXTENTS, &c[3].m, 4, 0);
	refuse_msg("EXTENTS count over", GW_MSG_EXTENTS, &c[3].m, 4, GW_WIRE_MAX_EXTENTS + 1);
	refuse_msg("EXTENTS empty range", GW_MSG_EXTENTS, &c[3].m, 8 + 8, 0);
	refuse_msg("EXTENTS range wraps", GW_MSG_EXTENTS, &c[3].m, 8 + 32 + 12, 0xffffffffu);
	refuse_msg("COMPLETE 65 channels", GW_MSG_COMPLETE, &c[6].m, 0, 65);
	refuse_msg("VERIFIED flag bit 2", GW_MSG_VERIFIED, &c[13].m, 0, 4);
	refuse_msg("FDS 65", GW_MSG_FDS, &c[11].m, 0, GW_MAX_RAM_BLOCKS + 1);
	refuse_msg("FDS out of block order", GW_MSG_FDS, &c[11].m, 8, 2);
	{
		/* ERROR whose length field claims more than GW_WIRE_MAX_REASON bytes, all present. */
		uint8_t a[8 + GW_WIRE_MAX_REASON + 1];
		union gw_msg out;

		gw_le32_put(a, GW_WERR_PROTO);
		gw_le16_put(a + 4, GW_WIRE_MAX_REASON + 1);
		memset(a + 6, 'r', GW_WIRE_MAX_REASON + 1);
		TEST_CHECK(gw_msg_decode(GW_MSG_ERROR, a, 6 + GW_WIRE_MAX_REASON + 1, &out, NULL, 0) == -EPROTO,
			   "ERROR reason of 513 bytes refused");
	}
}

/*
 * Postcopy messages: round trip, truncation, trailing bytes, and each
 * class of malformed field refused with a reason.
 */
static void test_postcopy_messages(void)
{
	static const uint64_t words[3] = { 0x1, 0x8000000000000000ull, 0xffffffffffffffffull };
	static const uint64_t pages[4] = { 0, 7, 1ull << 39, 123456 };
	struct msg_case c[8];
	unsigned n = 0;

	c[n] = (struct msg_case){ "PC_PREPARE", GW_MSG_PC_PREPARE, .reserved_off = -1 };
	n++;
	c[n] = (struct msg_case){ "PC_PREPARED", GW_MSG_PC_PREPARED, .reserved_off = -1 };
	c[n].m.pc_prepared.prepare_ns = 987654321;
	n++;
	c[n] = (struct msg_case){ "PC_DIRTY", GW_MSG_PC_DIRTY, .reserved_off = -1 };
	c[n].m.pc_map = (struct gw_msg_pc_map){ .block = 2, .nr_words = 3, .first_page = 128, .words = words };
	n++;
	c[n] = (struct msg_case){ "PC_REQ", GW_MSG_PC_REQ, .reserved_off = -1 };
	c[n].m.pc_req = (struct gw_msg_pc_req){ .block = 1, .count = 4, .pages = pages };
	n++;
	c[n] = (struct msg_case){ "PC_STATS", GW_MSG_PC_STATS, .reserved_off = 0 };
	c[n].m.pc_stats = (struct gw_msg_pc_stats){ .nr_vcpus = 3, .requests = 1300, .blocktime_ns = 5,
						    .latency_p99_ns = 900000, .vcpu_blocktime_ns = { 1, 2, 3 } };
	n++;
	c[n] = (struct msg_case){ "PC_END", GW_MSG_PC_END, .reserved_off = -1 };
	n++;
	c[n] = (struct msg_case){ "PC_RECOVER", GW_MSG_PC_RECOVER, .reserved_off = GW_WIRE_ID_BYTES + 4 };
	memset(c[n].m.pc_recover.id, 0x42, GW_WIRE_ID_BYTES);
	c[n].m.pc_recover.recoveries = 3;
	n++;
	c[n] = (struct msg_case){ "PC_RECOVERED", GW_MSG_PC_RECOVERED, .reserved_off = 4 };
	c[n].m.pc_recovered = (struct gw_msg_pc_recovered){ GW_PC_RECOVERED_DONE, 77 };
	n++;
	for (unsigned i = 0; i < n; i++)
		test_msg_case(&c[i]);
	{
		/* The map piece sent from the bitmap itself: the bytes gw_msg_encode writes. */
		uint8_t enc[16 + 3 * 8], hdr[16];
		struct iovec iov[2];
		struct gw_wbuf w;
		struct gw_msg_pc_map bad = c[2].m.pc_map;

		gw_wbuf_init(&w, enc, sizeof(enc));
		TEST_ASSERT(gw_msg_encode(GW_MSG_PC_DIRTY, &c[2].m, &w) == 0, "PC_DIRTY encode");
		TEST_ASSERT(gw_msg_pc_map_iov(&c[2].m.pc_map, hdr, iov) == 0, "PC_DIRTY parts");
		TEST_CHECK(iov[0].iov_len == 16 && !memcmp(iov[0].iov_base, enc, 16) &&
			   iov[1].iov_len == 3 * 8 && !memcmp(iov[1].iov_base, enc + 16, 3 * 8),
			   "PC_DIRTY parts differ from its encoding");
		bad.first_page = 129;
		TEST_CHECK(gw_msg_pc_map_iov(&bad, hdr, iov) == -EINVAL, "PC_DIRTY parts, unaligned first page");
		bad = c[2].m.pc_map;
		bad.nr_words = GW_WIRE_MAX_MAP_WORDS + 1;
		TEST_CHECK(gw_msg_pc_map_iov(&bad, hdr, iov) == -EINVAL, "PC_DIRTY parts, too many words");
	}
	refuse_msg("PC_DIRTY block 64", GW_MSG_PC_DIRTY, &c[2].m, 0, GW_MAX_RAM_BLOCKS);
	refuse_msg("PC_DIRTY no words", GW_MSG_PC_DIRTY, &c[2].m, 4, 0);
	refuse_msg("PC_DIRTY too many words", GW_MSG_PC_DIRTY, &c[2].m, 4, GW_WIRE_MAX_MAP_WORDS + 1);
	refuse_msg("PC_DIRTY unaligned first page", GW_MSG_PC_DIRTY, &c[2].m, 8, 129);
	refuse_msg("PC_DIRTY first page beyond 2^40", GW_MSG_PC_DIRTY, &c[2].m, 12, 1u << 9);
	refuse_msg("PC_REQ block 64", GW_MSG_PC_REQ, &c[3].m, 0, GW_MAX_RAM_BLOCKS);
	refuse_msg("PC_REQ no pages", GW_MSG_PC_REQ, &c[3].m, 4, 0);
	refuse_msg("PC_REQ too many pages", GW_MSG_PC_REQ, &c[3].m, 4, GW_WIRE_MAX_BATCH_PAGES + 1);
	refuse_msg("PC_REQ page beyond 2^40", GW_MSG_PC_REQ, &c[3].m, 8 + 8 + 4, 1u << 8);
	refuse_msg("PC_STATS reserved", GW_MSG_PC_STATS, &c[4].m, 0, 1);
	refuse_msg("PC_STATS 65 vCPUs", GW_MSG_PC_STATS, &c[4].m, 4, GW_WIRE_MAX_VCPUS + 1);
	refuse_msg("PC_RECOVERED flag bit 1", GW_MSG_PC_RECOVERED, &c[7].m, 0, 2);
	refuse_msg("COMPLETE flag bit 1", GW_MSG_COMPLETE, &(struct gw_msg_complete){ 1, 0, 5 }, 4, 2);
	{
		/* PC_STATS claiming more vCPUs than it carries: truncated. */
		uint8_t a[1024];
		union gw_msg out;
		size_t len = msg_enc(GW_MSG_PC_STATS, &c[4].m, a, sizeof(a));

		gw_le32_put(a + 4, 4);
		TEST_CHECK(gw_msg_decode(GW_MSG_PC_STATS, a, len, &out, NULL, 0) == -EPROTO,
			   "PC_STATS with a missing vCPU figure refused");
	}
}

int main(void)
{
	test_hello();
	test_hello_vm();
	test_pages_hdr();
	test_state();
	test_messages();
	test_postcopy_messages();
	TEST_EXIT();
}
