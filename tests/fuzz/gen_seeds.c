/* SPDX-License-Identifier: MIT */
/*
 * The fuzzers' seed corpus, made by the engine's own encoders (nothing
 * binary is kept in the tree): valid inputs of each harness, from which
 * libFuzzer mutates. Usage: gen_seeds DIR  ->  DIR/<harness>/seed-*.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "codec/codec.h"
#include "codec/xbzrle.h"
#include "util/state.h"
#include "wire/frame.h"
#include "wire/msg.h"

static char root[512];
static unsigned counter;

static void put(const char *harness, const void *a, size_t alen, const void *b, size_t blen)
{
	char path[700];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, harness);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/seed-%04u", root, harness, counter++);
	f = fopen(path, "wb");
	if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) || fclose(f)) {
		fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* One message as harness "msg" takes it: a type byte, then the payload. */
static size_t encode(uint16_t type, const void *m, uint8_t *out, size_t cap)
{
	struct gw_wbuf w;

	gw_wbuf_init(&w, out, cap);
	if (gw_msg_encode(type, m, &w)) {
		fprintf(stderr, "gen_seeds: cannot encode type %u\n", type);
		exit(1);
	}
	return w.len;
}

static void msg_seed(uint16_t type, const void *m)
{
	static uint8_t buf[1 << 16];
	uint8_t t = (uint8_t)type;
	size_t n = encode(type, m, buf, sizeof(buf));

	put("fuzz_msg", &t, 1, buf, n);
}

static void hello(struct gw_msg_hello *h, unsigned blocks, uint32_t flags)
{
	memset(h, 0, sizeof(*h));
	h->min_version = h->max_version = GW_WIRE_VERSION;
	memcpy(h->id, "fuzz-migration!", 16);
	h->page_size_bytes = 4096;
	h->nr_channels = flags & GW_HELLO_LOCAL ? 0 : 2;
	h->flags = flags;
	h->batch_pages = 128;
	h->nr_blocks = blocks;
	for (unsigned i = 0; i < blocks; i++) {
		snprintf(h->blocks[i].name, sizeof(h->blocks[i].name), "ram%u", i);
		h->blocks[i].gpa = (uint64_t)i << 30;
		h->blocks[i].size_bytes = 1u << 20;
		h->blocks[i].page_size_bytes = 4096;
	}
}

static void msg_seeds(void)
{
	static struct gw_state st;
	struct gw_extent ext[3] = { { 0, 4 }, { 10, 1 }, { 100, 20 } };
	union gw_msg m;
	uint8_t sec[64] = { 1, 2, 3 };
	struct gw_msg_pages_hdr ph = { .block = 0, .nr_entries = 2, .codec = 0, .data_bytes = 4096,
				       .raw_bytes = 4096 };
	uint8_t phb[GW_PAGES_HDR_BYTES + 16 + 8], t = GW_MSG_PAGES;
	static const uint64_t map_words[2] = { 0x8001, 1ull << 63 }, req_pages[3] = { 0, 5, 4095 };

	hello(&m.hello, 1, GW_HELLO_VERIFY);
	msg_seed(GW_MSG_HELLO, &m);
	hello(&m.hello, 3, GW_HELLO_XBZRLE);
	msg_seed(GW_MSG_HELLO, &m);
	m.hello_ack = (struct gw_msg_hello_ack){ .version = GW_WIRE_VERSION, .flags = GW_HELLO_VERIFY };
	msg_seed(GW_MSG_HELLO_ACK, &m);
	memset(&m, 0, sizeof(m));
	m.chan_hello.index = 1;
	msg_seed(GW_MSG_CHAN_HELLO, &m);
	m.chan_ack.index = 1;
	msg_seed(GW_MSG_CHAN_ACK, &m);
	m.extents = (struct gw_msg_extents){ .block = 0, .count = 3, .ext = ext };
	msg_seed(GW_MSG_EXTENTS, &m);
	m.round = (struct gw_msg_round){ .round = 3, .dirty_pages = 1000 };
	msg_seed(GW_MSG_ROUND, &m);
	m.chan_end = (struct gw_msg_chan_end){ .index = 0, .frames = 5, .pages = 300 };
	msg_seed(GW_MSG_CHAN_END, &m);
	gw_state_init(&st);
	gw_state_add(&st, "cpu0", 1, sec, sizeof(sec));
	gw_state_add(&st, "devices", 2, sec, 3);
	m.state.st = &st;
	msg_seed(GW_MSG_STATE, &m);
	gw_state_release(&st);
	m.complete = (struct gw_msg_complete){ .nr_channels = 2, .total_pages = 300 };
	msg_seed(GW_MSG_COMPLETE, &m);
	m.ready = (struct gw_msg_ready){ .load_ns = 1000 };
	msg_seed(GW_MSG_READY, &m);
	msg_seed(GW_MSG_GO, NULL);
	m.resumed = (struct gw_msg_resumed){ .go_to_resume_ns = 5, .resume_mono_ns = 7 };
	msg_seed(GW_MSG_RESUMED, &m);
	m.error = (struct gw_msg_error){ .code = GW_WERR_LAYOUT };
	snprintf(m.error.reason, sizeof(m.error.reason), "RAM layout refused");
	msg_seed(GW_MSG_ERROR, &m);
	m.fds = (struct gw_msg_fds){ .count = 2, .block = { 0, 1 } };
	msg_seed(GW_MSG_FDS, &m);
	m.verify = (struct gw_msg_verify){ 1, 2, 3 };
	msg_seed(GW_MSG_VERIFY, &m);
	m.verified = (struct gw_msg_verified){ .flags = GW_VERIFIED_MATCH, .digest_lo = 1 };
	msg_seed(GW_MSG_VERIFIED, &m);
	m.ping.token = 12345;
	msg_seed(GW_MSG_PING, &m);
	msg_seed(GW_MSG_PONG, &m);
	/* Postcopy (wire/msg_postcopy.c). */
	msg_seed(GW_MSG_PC_PREPARE, NULL);
	m.pc_prepared = (struct gw_msg_pc_prepared){ .prepare_ns = 123456 };
	msg_seed(GW_MSG_PC_PREPARED, &m);
	m.pc_map = (struct gw_msg_pc_map){ .block = 0, .nr_words = 2, .first_page = 128, .words = map_words };
	msg_seed(GW_MSG_PC_DIRTY, &m);
	msg_seed(GW_MSG_PC_NEEDED, &m);
	m.pc_req = (struct gw_msg_pc_req){ .block = 1, .count = 3, .pages = req_pages };
	msg_seed(GW_MSG_PC_REQ, &m);
	memset(&m, 0, sizeof(m));
	m.pc_stats.nr_vcpus = 2;
	m.pc_stats.remaining_pages = 10;
	m.pc_stats.vcpu_blocktime_ns[1] = 5000;
	msg_seed(GW_MSG_PC_STATS, &m);
	msg_seed(GW_MSG_PC_DONE, &m);
	msg_seed(GW_MSG_PC_END, NULL);
	memset(&m, 0, sizeof(m));
	m.pc_recover.id[0] = 7;
	m.pc_recover.recoveries = 1;
	msg_seed(GW_MSG_PC_RECOVER, &m);
	m.pc_recovered = (struct gw_msg_pc_recovered){ .flags = GW_PC_RECOVERED_DONE };
	msg_seed(GW_MSG_PC_RECOVERED, &m);
	gw_msg_pages_hdr_encode(phb, &ph);
	gw_le64_put(phb + GW_PAGES_HDR_BYTES, gw_page_entry(1, GW_PAGE_NORMAL));
	gw_le64_put(phb + GW_PAGES_HDR_BYTES + 8, gw_page_entry(2, GW_PAGE_ZERO));
	put("fuzz_msg", &t, 1, phb, GW_PAGES_HDR_BYTES + 16);
}

/* A PAGES payload of @n entries over @raw (compressed with @codec when it helps). */
static size_t pages(uint8_t *out, uint32_t block, const uint64_t *ent, uint32_t n, const uint8_t *raw,
		    size_t raw_len, enum gw_codec_id codec)
{
	const struct gw_codec_ops *c = codec ? gw_codec_get(codec) : NULL;
	struct gw_msg_pages_hdr ph = { .block = block, .nr_entries = n, .raw_bytes = (uint32_t)raw_len };
	uint8_t *area = out + GW_PAGES_HDR_BYTES + 8 * (size_t)n;
	size_t len = raw_len;

	if (c && !c->probe()) {
		void *ctx = c->ctx_new(c->default_level);
		ssize_t k = c->compress(ctx, raw, raw_len, area, c->bound(raw_len));

		c->ctx_free(ctx);
		if (k > 0) {
			len = (size_t)k;
			ph.codec = gw_wire_codec_from_id(codec);
		}
	}
	if (!ph.codec)
		memcpy(area, raw, raw_len);
	ph.data_bytes = (uint32_t)len;
	gw_msg_pages_hdr_encode(out, &ph);
	for (uint32_t i = 0; i < n; i++)
		gw_le64_put(out + GW_PAGES_HDR_BYTES + 8 * i, ent[i]);
	return GW_PAGES_HDR_BYTES + 8 * (size_t)n + len;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i % 61 < 30 ? i * seed : 0);
}

static void pages_seeds(void)
{
	static uint8_t raw[4 * 4096 + 64], out[8 * 4096];
	uint64_t ent[4] = { gw_page_entry(0, GW_PAGE_NORMAL), gw_page_entry(1, GW_PAGE_NORMAL),
			    gw_page_entry(5, GW_PAGE_ZERO), gw_page_entry(15, GW_PAGE_NORMAL) };
	uint8_t old[4096], new[4096], delta[2048];
	ssize_t dn;
	size_t n;

	fill(raw, 3 * 4096, 7);
	for (uint8_t flags = 0; flags < 2; flags++) {
		for (uint32_t block = 0; block < 2; block++) {
			for (unsigned c = 0; c <= GW_CODEC_ISAL; c++) {
				n = pages(out, block, ent, 4, raw, 3 * 4096, (enum gw_codec_id)c);
				put("fuzz_pages_in", &flags, 1, out, n);
			}
		}
	}
	/* XBZRLE: le16 length, delta. */
	fill(old, 4096, 3);
	memcpy(new, old, 4096);
	memset(new + 100, 0x77, 40);
	dn = gw_xbzrle_encode(old, new, 4096, delta, sizeof(delta));
	raw[0] = (uint8_t)dn;
	raw[1] = (uint8_t)(dn >> 8);
	memcpy(raw + 2, delta, (size_t)dn);
	ent[0] = gw_page_entry(3, GW_PAGE_XBZRLE);
	n = pages(out, 1, ent, 1, raw, 2 + (size_t)dn, GW_CODEC_NONE);
	put("fuzz_pages_in", &(uint8_t){ 1 }, 1, out, n);
	/* xbzrle harness: the delta alone, and a round trip input. */
	put("fuzz_xbzrle", &(uint8_t){ 0 }, 1, delta, (size_t)dn);
	put("fuzz_xbzrle", &(uint8_t){ 1 }, 1, old, 600);
}

static void codec_seeds(void)
{
	static uint8_t raw[8 * 4096], out[16 * 4096 + 4];

	fill(raw, sizeof(raw), 13);
	for (unsigned c = GW_CODEC_ZSTD; c <= GW_CODEC_ISAL; c++) {
		const struct gw_codec_ops *ops = gw_codec_get((enum gw_codec_id)c);
		void *ctx;
		ssize_t k;

		if (!ops || ops->probe())
			continue;
		ctx = ops->ctx_new(ops->default_level);
		k = ops->compress(ctx, raw, sizeof(raw), out + 4, sizeof(out) - 4);
		ops->ctx_free(ctx);
		if (k <= 0)
			continue;
		out[0] = (uint8_t)(c - 1);
		out[1] = sizeof(raw) & 0xff;
		out[2] = (sizeof(raw) >> 8) & 0xff;
		out[3] = (sizeof(raw) >> 16) & 0xff;
		put("fuzz_codec", out, 4 + (size_t)k, NULL, 0);
	}
}

/* A session stream record: conn, type, le16 length, payload. */
static size_t rec(uint8_t *out, uint8_t conn, uint16_t type, const void *m)
{
	size_t n = type == GW_MSG_GO ? 0 : encode(type, m, out + 4, 1 << 16);

	out[0] = conn;
	out[1] = (uint8_t)type;
	out[2] = (uint8_t)n;
	out[3] = (uint8_t)(n >> 8);
	return 4 + n;
}

static void session_seeds(void)
{
	static uint8_t s[1 << 17], raw[2 * 4096], pg[4 * 4096];
	static struct gw_state st;
	uint64_t ent[3] = { gw_page_entry(1, GW_PAGE_NORMAL), gw_page_entry(2, GW_PAGE_NORMAL),
			    gw_page_entry(9, GW_PAGE_ZERO) };
	struct gw_extent ext = { 0, 16 };
	union gw_msg m;
	size_t at, n;

	for (int variant = 0; variant < 3; variant++) {
		at = 0;
		s[at++] = variant == 1 ? GW_HELLO_XBZRLE : 0;	/* flags (verify off: no wait after) */
		s[at++] = (uint8_t)(variant == 2 ? GW_WIRE_CODEC_AUTO : GW_WIRE_CODEC_NONE);
		m.extents = (struct gw_msg_extents){ .block = 0, .count = 1, .ext = &ext };
		if (variant)
			at += rec(s + at, 0, GW_MSG_EXTENTS, &m);
		m.round = (struct gw_msg_round){ .round = 0, .dirty_pages = 3 };
		at += rec(s + at, 0, GW_MSG_ROUND, &m);
		m.ping.token = 1;
		at += rec(s + at, 0, GW_MSG_PING, &m);
		fill(raw, sizeof(raw), 5 + variant);
		n = pages(pg, 0, ent, 3, raw, sizeof(raw), variant == 2 ? GW_CODEC_LZ4 : GW_CODEC_NONE);
		s[at] = 1;
		s[at + 1] = GW_MSG_PAGES;
		s[at + 2] = (uint8_t)n;
		s[at + 3] = (uint8_t)(n >> 8);
		memcpy(s + at + 4, pg, n);
		at += 4 + n;
		m.chan_end = (struct gw_msg_chan_end){ .index = 0, .frames = 1, .pages = 3 };
		at += rec(s + at, 1, GW_MSG_CHAN_END, &m);
		gw_state_init(&st);
		m.state.st = &st;
		at += rec(s + at, 0, GW_MSG_STATE, &m);
		m.complete = (struct gw_msg_complete){ .nr_channels = 1, .total_pages = 3 };
		at += rec(s + at, 0, GW_MSG_COMPLETE, &m);
		at += rec(s + at, 0, GW_MSG_GO, NULL);
		put("fuzz_dest_session", s, at, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_seeds DIR\n");
		return 2;
	}
	snprintf(root, sizeof(root), "%s", argv[1]);
	mkdir(root, 0755);
	msg_seeds();
	pages_seeds();
	codec_seeds();
	session_seeds();
	printf("gen_seeds: %u seeds in %s\n", counter, root);
	return 0;
}
