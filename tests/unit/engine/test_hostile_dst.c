/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a destination facing a hostile or broken source never writes
 * outside guest RAM, never resumes the VM, and ends failed with a reason
 * that it also sends to the source in an ERROR frame on the control
 * connection. Strangers (a data connection with another migration id, a
 * first connection that is not godwit) and HELLOs it cannot take (a layout
 * or page size it does not have, more RAM than max-memory-bytes, a local
 * migration without its descriptors) are refused with an ERROR frame on
 * their own connection and do not fail the migration: the real source
 * that comes next migrates. A well-formed,
 * hand-made migration completes, resumes the VM exactly once, and leaves
 * guest RAM holding exactly the pages sent (normal, zero, compressed,
 * XBZRLE), with the digest verified when asked.
 *
 * A stranger that keeps the control connection alive with PINGs but sends
 * no page stalls (keepalive_stranger); pages trickled past the precopy's
 * bound fail it (trickle_past_precopy_limit); EXTENTS over all of RAM and
 * ROUND 0 with no page commit at most 64 MiB (extents_commit_bounded).
 *
 * The log (log_*): block names made of quotes, newlines, escape codes and
 * invalid UTF-8 never split a line, reach the sink raw or forge an event
 * (no line is a mig_done); 1000 refused HELLOs from one peer write at most
 * the rate limit's burst, one line per second after it and the counts of
 * the rest (lines + counted = 1000, counted by lines, not timed), and the
 * real source that comes next migrates.
 *
 * Guest RAM is a 16 MiB memfd mapping between two 1 MiB read-only guard
 * regions: a write past either end faults (the test crashes) and the
 * guards' pattern is checked after each scenario. Each scenario uses a
 * fresh session, RAM and socket.
 *
 * Postcopy scenarios (pc_*): after the switch the VM runs here, so the
 * refusal cannot leave it unresumed; what holds is that a page never
 * requested, answered twice, pushed twice, pushed though the destination
 * trusts its copy, out of range or XBZRLE-encoded is refused with a reason
 * sent to the source, nothing is written outside guest RAM, and the
 * session fails. The well-behaved postcopy source completes with every
 * page placed once (a late copy of the answered page dropped).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "codec/codec.h"
#include "util/crc32c.h"
#include "mem/digest.h"
#include "mem/uffd_post.h"
#include "net/io.h"
#include "wire/frame.h"
#include "wire/msg.h"
#include "util/state.h"
#include "util/lograte.h"
#include "codec/xbzrle.h"
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (16u << 20)
#define RAM_PAGES (RAM_BYTES / TEST_PAGE_BYTES)
#define GUARD_BYTES (1u << 20)
#define PAGE TEST_PAGE_BYTES
#define HS_TIMEOUT_MS 5000

/* The hostile source and the destination under test. Main thread only. */
struct env {
	const char *name;
	struct test_ram ram;
	struct test_vm tvm;
	struct gw_session *s;
	char path[108];
	struct gw_conn ctl, data;
	uint8_t id[GW_WIRE_ID_BYTES];
	uint8_t challenge[GW_WIRE_ID_BYTES];	/* HELLO_ACK's, what CHAN_HELLO echoes */
	uint32_t hello_flags, codec;
	bool got_error;			/* an ERROR frame arrived on ctl */
	struct gw_msg_error err;
	bool expect_ok;			/* scenario is a valid migration */
	/* Postcopy scenarios: the preempt connection and the guest that faults. */
	struct gw_conn pre;
	uint32_t nr_data;		/* data connections: the preempt one has this index */
	pthread_t toucher;
	bool toucher_started;
	uint32_t touch_page;		/* the page the destination guest reads at resume */
};

static const struct gw_digest no_digest = { 0, 0 };

/* ---------------- the hand-made source ---------------- */

/* A raw payload: for frames that are malformed on purpose. */
static int send_buf(struct gw_conn *c, uint16_t type, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };

	return gw_conn_send(c, type, &iov, len ? 1 : 0, NULL, 0);
}

static int err_decode(const void *buf, size_t len, struct gw_msg_error *m)
{
	return gw_msg_decode(GW_MSG_ERROR, buf, len, m, NULL, 0);
}

static int hs_connect(struct env *e, struct gw_conn *c)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	TEST_ASSERT(fd >= 0, "socket");
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", e->path);
	TEST_ASSERT(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0, "connect %s", e->path);
	gw_conn_init(c, fd);
	gw_conn_set_timeout(c, HS_TIMEOUT_MS);
	return fd;
}

/* Receive one frame; ERROR frames on ctl are recorded. Returns type or -errno. */
static int hs_recv(struct env *e, struct gw_conn *c, void *buf, size_t cap, ssize_t *len)
{
	struct gw_frame_hdr h;
	ssize_t n = gw_conn_recv(c, &h, buf, cap, NULL, 0, NULL);

	if (len)
		*len = n;
	if (n < 0)
		return (int)n;
	if (h.type == GW_MSG_ERROR && c == &e->ctl && !e->got_error) {
		TEST_CHECK(err_decode(buf, (size_t)n, &e->err) == 0, "%s: ERROR decodes", e->name);
		e->got_error = true;
	}
	return h.type;
}

static void hello_default(struct env *e, struct gw_msg_hello *m)
{
	memset(m, 0, sizeof(*m));
	m->min_version = m->max_version = GW_WIRE_VERSION;
	memcpy(m->id, e->id, sizeof(m->id));
	m->page_size_bytes = PAGE;
	m->nr_channels = 1;
	m->codec = 0;
	m->flags = 0;
	m->batch_pages = 128;
	m->nr_blocks = 1;
	strcpy(m->blocks[0].name, "ram0");
	m->blocks[0].size_bytes = RAM_BYTES;
	m->blocks[0].page_size_bytes = PAGE;
}

/* Send HELLO; returns the answer's type (HELLO_ACK expected). */
static int hs_hello_msg(struct env *e, const struct gw_msg_hello *m)
{
	uint8_t buf[GW_MSG_HELLO_FIXED_BYTES + GW_MAX_RAM_BLOCKS * GW_MSG_HELLO_BLOCK_BYTES];
	union gw_msg ack;
	ssize_t n;
	int t;

	e->hello_flags = m->flags;
	e->codec = m->codec;
	hs_connect(e, &e->ctl);
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_HELLO, m) == 0, "send HELLO");
	t = hs_recv(e, &e->ctl, buf, sizeof(buf), &n);
	if (t == GW_MSG_HELLO_ACK && gw_msg_decode(GW_MSG_HELLO_ACK, buf, (uint32_t)n, &ack, NULL, 0) == 0)
		memcpy(e->challenge, ack.hello_ack.challenge, sizeof(e->challenge));
	return t;
}

static void hs_hello_flags(struct env *e, uint32_t flags, uint32_t codec)
{
	struct gw_msg_hello m;
	int t;

	hello_default(e, &m);
	m.flags = flags;
	m.codec = codec;
	t = hs_hello_msg(e, &m);
	TEST_ASSERT(t == GW_MSG_HELLO_ACK, "%s: HELLO answered by %d", e->name, t);
}

static void hs_hello(struct env *e)
{
	hs_hello_flags(e, 0, 0);
}

/* Open a data connection presenting @id and @idx; returns the answer's type. */
static int hs_data_conn(struct env *e, struct gw_conn *c, const uint8_t *id, uint32_t idx,
			struct gw_msg_error *err)
{
	uint8_t buf[GW_WIRE_ID_BYTES + 4 + GW_WIRE_MAX_REASON + 8];
	struct gw_msg_chan_hello m = { .index = idx };
	ssize_t n;
	int t;

	hs_connect(e, c);
	memcpy(m.id, id, GW_WIRE_ID_BYTES);
	memcpy(m.challenge, e->challenge, GW_WIRE_ID_BYTES);
	TEST_ASSERT(gw_conn_send_msg(c, GW_MSG_CHAN_HELLO, &m) == 0, "send CHAN_HELLO");
	t = hs_recv(e, c, buf, sizeof(buf), &n);
	if (t == GW_MSG_ERROR && err)
		TEST_CHECK(err_decode(buf, (size_t)n, err) == 0, "data ERROR decodes");
	return t;
}

static void hs_open_data(struct env *e)
{
	int t = hs_data_conn(e, &e->data, e->id, 0, NULL);

	TEST_ASSERT(t == GW_MSG_CHAN_ACK, "%s: CHAN_HELLO answered by %d", e->name, t);
}

static void hs_setup(struct env *e)
{
	hs_hello(e);
	hs_open_data(e);
}

static int hs_round(struct env *e, uint32_t round)
{
	struct gw_msg_round m = { .round = round };

	return gw_conn_send_msg(&e->ctl, GW_MSG_ROUND, &m);
}

static int hs_pages(struct gw_conn *c, uint32_t block, uint32_t round, uint32_t codec,
		    const uint64_t *entries, uint32_t n, const void *data, uint32_t data_len,
		    uint32_t raw_bytes)
{
	struct gw_msg_pages_hdr ph = { .block = block, .nr_entries = n, .round = round,
				       .codec = codec, .data_bytes = data_len, .raw_bytes = raw_bytes };
	uint8_t phb[GW_PAGES_HDR_BYTES];
	uint8_t le[GW_WIRE_MAX_BATCH_PAGES * GW_PAGES_ENTRY_BYTES];
	struct iovec iov[3];

	TEST_ASSERT(n <= GW_WIRE_MAX_BATCH_PAGES, "batch");
	gw_msg_pages_hdr_encode(phb, &ph);
	for (uint32_t i = 0; i < n; i++)
		gw_le64_put(le + (size_t)i * GW_PAGES_ENTRY_BYTES, entries[i]);
	iov[0] = (struct iovec){ phb, sizeof(phb) };
	iov[1] = (struct iovec){ le, (size_t)n * GW_PAGES_ENTRY_BYTES };
	iov[2] = (struct iovec){ (void *)data, data_len };
	return gw_conn_send(c, GW_MSG_PAGES, iov, data_len ? 3 : 2, NULL, 0);
}

/* Plain PAGES (codec none) with raw_bytes == data. */
static int hs_pages_plain(struct env *e, uint32_t round, const uint64_t *entries, uint32_t n,
			  const void *data, uint32_t len)
{
	return hs_pages(&e->data, 0, round, 0, entries, n, data, len, len);
}

static int hs_chan_end(struct env *e, uint64_t frames, uint64_t pages)
{
	struct gw_msg_chan_end m = { .index = 0, .frames = frames, .pages = pages };

	return gw_conn_send_msg(&e->data, GW_MSG_CHAN_END, &m);
}

static int hs_state_empty(struct env *e)
{
	static struct gw_state empty;	/* no sections */

	return gw_conn_send_msg(&e->ctl, GW_MSG_STATE, &(struct gw_msg_state){ &empty });
}

static int hs_complete(struct env *e, uint64_t total_pages)
{
	struct gw_msg_complete m = { .nr_channels = 1, .total_pages = total_pages };

	return gw_conn_send_msg(&e->ctl, GW_MSG_COMPLETE, &m);
}

/* A frame with any type number and the right seq, written raw; its CRC wrong when asked. */
static int hs_send_raw_crc(struct gw_conn *c, uint16_t type, const void *payload, uint32_t len,
			   bool bad_crc)
{
	uint8_t *frame = malloc(GW_WIRE_HDR_BYTES + (size_t)len);
	size_t done = 0, total = GW_WIRE_HDR_BYTES + (size_t)len;
	uint32_t crc;

	TEST_ASSERT(frame, "malloc");
	gw_frame_hdr_encode(frame, type, len, c->send_seq);
	memcpy(frame + GW_WIRE_HDR_BYTES, payload, len);
	crc = gw_crc32c(0, frame, total);
	gw_frame_hdr_set_crc(frame, crc ^ (bad_crc ? 1 : 0));
	c->send_seq++;
	while (done < total) {
		ssize_t n = send(c->fd, frame + done, total - done, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		done += (size_t)n;
	}
	free(frame);
	return done == total ? 0 : -EPIPE;
}

static int hs_send_raw(struct gw_conn *c, uint16_t type, const void *payload, uint32_t len)
{
	return hs_send_raw_crc(c, type, payload, len, false);
}

/*
 * Finish a valid migration whose data connection carried @frames/@pages;
 * with HELLO_VERIFY, send @dg as the source's digest and expect VERIFIED
 * to say whether it matched as @expect_match.
 */
static void hs_finish_valid(struct env *e, uint64_t frames, uint64_t pages, struct gw_digest dg,
			    bool expect_match)
{
	uint8_t buf[64];
	union gw_msg m;
	int t;

	TEST_ASSERT(hs_chan_end(e, frames, pages) == 0, "CHAN_END");
	TEST_ASSERT(hs_state_empty(e) == 0, "STATE");
	TEST_ASSERT(hs_complete(e, pages) == 0, "COMPLETE");
	t = hs_recv(e, &e->ctl, buf, sizeof(buf), NULL);
	TEST_CHECK(t == GW_MSG_READY, "%s: READY expected, got %d (%s)", e->name, t,
		   e->got_error ? e->err.reason : "");
	if (t != GW_MSG_READY)
		return;
	TEST_CHECK(test_vm_load(&e->tvm.resume_calls) == 0, "no resume before GO");
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_GO, NULL) == 0, "GO");
	do	/* the fault handler's PC_STATS may come before RESUMED: both follow GO */
		t = hs_recv(e, &e->ctl, buf, sizeof(buf), NULL);
	while (t == GW_MSG_PC_STATS);
	TEST_CHECK(t == GW_MSG_RESUMED, "%s: RESUMED expected, got %d", e->name, t);
	if (!(e->hello_flags & GW_HELLO_VERIFY))
		return;
	m.verify = (struct gw_msg_verify){ dg.lo, dg.hi, 0 };
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_VERIFY, &m.verify) == 0, "VERIFY");
	t = gw_conn_recv_msg(&e->ctl, &m, buf, sizeof(buf), NULL, 0);
	TEST_CHECK(t == GW_MSG_VERIFIED, "%s: VERIFIED expected, got %d", e->name, t);
	if (t == GW_MSG_VERIFIED)
		TEST_CHECK(!!(m.verified.flags & GW_VERIFIED_MATCH) == expect_match,
			   "%s: VERIFIED flags 0x%x, expected a %s", e->name, m.verified.flags,
			   expect_match ? "match" : "mismatch");
}

static void fill_page(uint8_t *p, uint32_t seed)
{
	for (unsigned i = 0; i < PAGE; i += 4) {
		uint32_t v = seed * 2654435761u + i * 40503u + 1;

		memcpy(p + i, &v, 4);
	}
}

/* ---------------- hostile scenarios: one bad thing each ---------------- */

struct scenario {
	const char *name;
	void (*fn)(struct env *e);
	int expect_err;			/* -errno the session must end with; 0 = completes */
};

/* Scenarios whose error must say what happened, in these words. */
static const struct {
	const char *scenario, *why;
} whys[] = {
	{ "wrong_seq_data", "frame sequence number 4 where 1 was due" },
	{ "unknown_type_99_data", "unknown frame type 99" },
	{ "keepalive_stranger", "sent no pages for 3000 ms" },
	{ "trickle_past_precopy_limit", "did not end within 2000 ms (precopy-limit-ms)" },
};

static const char *expected_why(const char *scenario)
{
	for (size_t i = 0; i < sizeof(whys) / sizeof(whys[0]); i++)
		if (!strcmp(whys[i].scenario, scenario))
			return whys[i].why;
	return "";
}

/* Set by a scenario: its checks once the session is freed (run_scenario calls and clears it). */
static void (*after_free)(void);

static void sc_page_beyond_block(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent = gw_page_entry(RAM_PAGES, GW_PAGE_NORMAL);	/* first page of the guard */

	fill_page(page, 1);
	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, page, PAGE);
}

static void sc_page_index_huge(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent[2] = { gw_page_entry(3, GW_PAGE_NORMAL), gw_page_entry((1ull << 60) - 1, GW_PAGE_NORMAL) };
	uint8_t data[2 * PAGE];

	fill_page(page, 2);
	memcpy(data, page, PAGE);
	memcpy(data + PAGE, page, PAGE);
	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, ent, 2, data, sizeof(data));
}

static void sc_zero_page_beyond(struct env *e)
{
	uint64_t ent = gw_page_entry(RAM_PAGES + 1, GW_PAGE_ZERO);

	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, NULL, 0);
}

static void sc_block_1(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent = gw_page_entry(0, GW_PAGE_NORMAL);

	fill_page(page, 3);
	hs_setup(e);
	hs_round(e, 0);
	hs_pages(&e->data, 1, 0, 0, &ent, 1, page, PAGE, PAGE);
}

static void sc_kind_7(struct env *e)
{
	uint64_t ent[2] = { gw_page_entry(1, GW_PAGE_ZERO), gw_page_entry(2, 7) };

	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, ent, 2, NULL, 0);
}

static void sc_kind_0(struct env *e)
{
	uint64_t ent = gw_page_entry(2, 0);

	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, NULL, 0);
}

static void sc_raw_bytes_disagree(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent[2] = { gw_page_entry(4, GW_PAGE_NORMAL), gw_page_entry(5, GW_PAGE_NORMAL) };

	fill_page(page, 4);
	hs_setup(e);
	hs_round(e, 0);
	/* Two normal entries, one page of bytes: consistent with the frame length. */
	hs_pages_plain(e, 0, ent, 2, page, PAGE);
}

static void sc_bad_crc(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent = gw_page_entry(6, GW_PAGE_NORMAL);

	struct gw_msg_pages_hdr ph = { .nr_entries = 1, .data_bytes = PAGE, .raw_bytes = PAGE };
	uint8_t payload[GW_PAGES_HDR_BYTES + GW_PAGES_ENTRY_BYTES + PAGE];

	fill_page(page, 5);
	gw_msg_pages_hdr_encode(payload, &ph);
	gw_le64_put(payload + GW_PAGES_HDR_BYTES, ent);
	memcpy(payload + GW_PAGES_HDR_BYTES + GW_PAGES_ENTRY_BYTES, page, PAGE);
	hs_setup(e);
	hs_round(e, 0);
	hs_send_raw_crc(&e->data, GW_MSG_PAGES, payload, sizeof(payload), true);
}

static void sc_zstd_garbage(struct env *e)
{
	uint8_t junk[300];
	uint64_t ent[2] = { gw_page_entry(7, GW_PAGE_NORMAL), gw_page_entry(8, GW_PAGE_NORMAL) };

	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	hs_hello_flags(e, 0, GW_CODEC_ZSTD);
	hs_open_data(e);
	hs_round(e, 0);
	hs_pages(&e->data, 0, 0, GW_CODEC_ZSTD, ent, 2, junk, sizeof(junk), 2 * PAGE);
}

/* Valid lz4 of one page, but raw_bytes claims two pages. */
static void sc_lz4_short(struct env *e)
{
	const struct gw_codec_ops *lz4 = gw_codec_get(GW_CODEC_LZ4);
	uint8_t page[PAGE], comp[2 * PAGE];
	uint64_t ent[2] = { gw_page_entry(7, GW_PAGE_NORMAL), gw_page_entry(8, GW_PAGE_NORMAL) };
	void *ctx;
	ssize_t n;

	TEST_ASSERT(lz4, "lz4 built");
	ctx = lz4->ctx_new(lz4->default_level);
	fill_page(page, 6);
	n = lz4->compress(ctx, page, PAGE, comp, sizeof(comp));
	lz4->ctx_free(ctx);
	TEST_ASSERT(n > 0, "lz4 compress");
	hs_hello_flags(e, 0, GW_CODEC_LZ4);
	hs_open_data(e);
	hs_round(e, 0);
	hs_pages(&e->data, 0, 0, GW_CODEC_LZ4, ent, 2, comp, (uint32_t)n, 2 * PAGE);
}

static void sc_xbzrle_unannounced(struct env *e)
{
	uint8_t rec[8] = { 4, 0, 0, 2, 0xab, 0xcd };	/* le16 len 4: run 0, 2 bytes */
	uint64_t ent = gw_page_entry(9, GW_PAGE_XBZRLE);

	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, rec, 6);
}

static void sc_xbzrle_garbage(struct env *e)
{
	/* Announced, but the delta claims a run far past the page. */
	uint8_t rec[8] = { 5, 0, 0xff, 0xff, 0x03, 1, 0x55 };
	uint64_t ent = gw_page_entry(RAM_PAGES - 1, GW_PAGE_XBZRLE);

	hs_hello_flags(e, GW_HELLO_XBZRLE, 0);
	hs_open_data(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, rec, 7);
}

static void sc_xbzrle_len_overrun(struct env *e)
{
	uint8_t rec[8] = { 0x00, 0x10, 0, 2, 0xab, 0xcd };	/* le16 len 4096 > 4 bytes left */
	uint64_t ent = gw_page_entry(9, GW_PAGE_XBZRLE);

	hs_hello_flags(e, GW_HELLO_XBZRLE, 0);
	hs_open_data(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, rec, 6);
}

static void sc_unknown_type_ctl(struct env *e)
{
	hs_setup(e);
	hs_send_raw(&e->ctl, 99, "x", 1);
}

static void sc_unknown_type_data(struct env *e)
{
	hs_setup(e);
	hs_round(e, 0);
	hs_send_raw(&e->data, 99, "x", 1);
}

static void sc_wrong_seq_data(struct env *e)
{
	uint8_t buf[16] = { 0 };

	hs_setup(e);
	hs_round(e, 0);
	e->data.send_seq += 3;
	send_buf(&e->data, GW_MSG_CHAN_END, buf, 16);
}

static void sc_chan_ack_on_ctl(struct env *e)
{
	struct gw_msg_chan_ack ack = { 0 };

	hs_setup(e);
	gw_conn_send_msg(&e->ctl, GW_MSG_CHAN_ACK, &ack);
}

static void sc_pages_on_ctl(struct env *e)
{
	uint64_t ent = gw_page_entry(1, GW_PAGE_ZERO);

	hs_setup(e);
	hs_round(e, 0);
	hs_pages(&e->ctl, 0, 0, 0, &ent, 1, NULL, 0, 0);
}

static void sc_state_truncated(struct env *e)
{
	uint8_t buf[4 + GW_SECTION_NAME_MAX + 8 + 10] = { 1, 0, 0, 0, 'c', 'p', 'u' };

	buf[4 + GW_SECTION_NAME_MAX + 4] = 100;	/* section claims 100 bytes, 10 follow */
	hs_setup(e);
	hs_round(e, 0);
	send_buf(&e->ctl, GW_MSG_STATE, buf, sizeof(buf));
}

static void sc_state_bad_crc(struct env *e)
{
	uint8_t buf[4] = { 0 };

	hs_setup(e);
	hs_round(e, 0);
	hs_send_raw_crc(&e->ctl, GW_MSG_STATE, buf, sizeof(buf), true);
}

static void sc_second_state(struct env *e)
{
	hs_setup(e);
	hs_round(e, 0);
	hs_state_empty(e);
	hs_state_empty(e);
}

static void sc_complete_total_mismatch(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent = gw_page_entry(10, GW_PAGE_NORMAL);

	fill_page(page, 7);
	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, page, PAGE);
	hs_chan_end(e, 1, 1);
	hs_state_empty(e);
	hs_complete(e, 2);
}

static void sc_chan_end_wrong_totals(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent = gw_page_entry(10, GW_PAGE_NORMAL);

	fill_page(page, 8);
	hs_setup(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, page, PAGE);
	hs_chan_end(e, 1, 5);
}

static void sc_complete_before_state(struct env *e)
{
	hs_setup(e);
	hs_round(e, 0);
	hs_chan_end(e, 0, 0);
	hs_complete(e, 0);
}

static void sc_go_before_ready(struct env *e)
{
	hs_setup(e);
	hs_round(e, 0);
	gw_conn_send_msg(&e->ctl, GW_MSG_GO, NULL);
}

static void sc_round_backwards(struct env *e)
{
	hs_setup(e);
	hs_round(e, 0);
	hs_round(e, 3);
	hs_round(e, 2);
}

static void sc_extents_beyond(struct env *e)
{
	struct gw_extent ext = { RAM_PAGES - 2, 3 };	/* one page past the end */
	struct gw_msg_extents m = { .block = 0, .count = 1, .ext = &ext };

	hs_setup(e);
	gw_conn_send_msg(&e->ctl, GW_MSG_EXTENTS, &m);
}

/*
 * Wait up to @ms for a frame on ctl (an ERROR is recorded): whether the
 * destination answered with ERROR.
 */
static bool ctl_error_within(struct env *e, int ms)
{
	struct pollfd pfd = { .fd = e->ctl.fd, .events = POLLIN };
	uint8_t buf[GW_WIRE_MAX_REASON + 64];

	if (poll(&pfd, 1, ms) > 0 && hs_recv(e, &e->ctl, buf, sizeof(buf), NULL) < 0 && !e->got_error)
		return true;	/* closed without a word: the run_scenario checks say so */
	return e->got_error;
}

/*
 * HELLO, CHAN_HELLO, then only PINGs (each answered): no page ever comes,
 * so the migration stalls after io-timeout-ms (3 s) however lively the
 * control connection. At most 30 PINGs half a second apart (a hang guard).
 */
static void sc_keepalive(struct env *e)
{
	hs_setup(e);
	for (int i = 0; i < 30; i++) {
		struct gw_msg_ping m = { .token = (uint64_t)i };

		if (gw_conn_send_msg(&e->ctl, GW_MSG_PING, &m) || ctl_error_within(e, 500))
			break;
	}
}

/*
 * A page every half second keeps the migration progressing, but the whole
 * precopy is bounded (run_scenario sets precopy-limit-ms 2000 for it): the destination gives
 * up however the pages trickle. At most 40 pages (a hang guard).
 */
static void sc_trickle(struct env *e)
{
	static uint8_t page[PAGE];

	hs_setup(e);
	hs_round(e, 0);
	for (uint32_t i = 0; i < 40; i++) {
		uint64_t ent = gw_page_entry(i, GW_PAGE_NORMAL);

		fill_page(page, i);
		if (hs_pages_plain(e, 0, &ent, 1, page, PAGE) || ctl_error_within(e, 500))
			break;
	}
}

/*
 * A HELLO refused before anything is committed is answered on its own
 * connection with ERROR @code; the destination keeps waiting, and a valid
 * migration from the real source then completes.
 */
static void expect_refused_then_valid(struct env *e, int code)
{
	uint8_t buf[GW_WIRE_MAX_REASON + 64], page[PAGE];
	uint64_t ent = gw_page_entry(5, GW_PAGE_NORMAL);
	struct gw_stats st = { .size = sizeof(st) };

	for (int i = 0; i < 4 && !e->got_error; i++)
		if (hs_recv(e, &e->ctl, buf, sizeof(buf), NULL) < 0)
			break;
	TEST_CHECK(e->got_error && e->err.code == gw_wire_err_from_errno(code),
		   "%s: HELLO refused with code %u (%s), expected %u", e->name, e->err.code, e->err.reason,
		   gw_wire_err_from_errno(code));
	printf("%-28s refused on its connection: %s\n", e->name, e->err.reason);
	gw_conn_close(&e->ctl);
	gw_session_stats(e->s, &st);
	TEST_CHECK(st.status != GW_STATUS_FAILED, "%s: the destination gave up (%s)", e->name, st.error);
	e->got_error = false;
	hs_setup(e);
	fill_page(page, 77);
	TEST_ASSERT(hs_round(e, 0) == 0, "ROUND 0");
	TEST_ASSERT(hs_pages_plain(e, 0, &ent, 1, page, PAGE) == 0, "PAGES");
	hs_finish_valid(e, 1, 1, no_digest, true);
	TEST_CHECK(!memcmp(e->ram.host + 5 * PAGE, page, PAGE), "%s: page 5 arrived", e->name);
}

static void sc_layout_mismatch(struct env *e)
{
	struct gw_msg_hello m;

	hello_default(e, &m);
	m.blocks[0].size_bytes = RAM_BYTES / 2;
	hs_hello_msg(e, &m);
	expect_refused_then_valid(e, -ERANGE);
}

static void sc_hello_too_big(struct env *e)
{
	struct gw_msg_hello m;

	/* The session's max-memory-bytes is RAM_BYTES: a source with more is refused. */
	hello_default(e, &m);
	m.blocks[0].size_bytes = (uint64_t)RAM_BYTES * 65536;
	hs_hello_msg(e, &m);
	expect_refused_then_valid(e, -ERANGE);
}

static void sc_hello_page_size(struct env *e)
{
	struct gw_msg_hello m;

	hello_default(e, &m);
	m.page_size_bytes = 8192;
	m.blocks[0].page_size_bytes = 8192;
	hs_hello_msg(e, &m);
	expect_refused_then_valid(e, -EPROTO);
}

static void sc_hello_local_flag_unix_no_fds(struct env *e)
{
	struct gw_msg_hello m;
	uint8_t buf[64];

	/* LOCAL announced, but the FDS frame carries no descriptors. */
	hello_default(e, &m);
	m.flags = GW_HELLO_LOCAL;
	m.nr_channels = 0;	/* local: pages never travel */
	hs_connect(e, &e->ctl);
	gw_conn_send_msg(&e->ctl, GW_MSG_HELLO, &m);
	memset(buf, 0, 8);
	buf[0] = 1;
	send_buf(&e->ctl, GW_MSG_FDS, buf, 8);
	expect_refused_then_valid(e, -EPROTO);
}

static void sc_channel_index_invalid(struct env *e)
{
	struct gw_msg_error derr;
	int t;

	hs_hello(e);
	t = hs_data_conn(e, &e->data, e->id, 3, &derr);
	TEST_CHECK(t == GW_MSG_ERROR, "channel 3 of 1 refused on its connection (%d)", t);
}

static void sc_digest_mismatch(struct env *e)
{
	uint8_t page[PAGE];
	uint64_t ent = gw_page_entry(11, GW_PAGE_NORMAL);
	struct gw_digest dg = { 0x1234, 0x5678 };

	fill_page(page, 9);
	hs_hello_flags(e, GW_HELLO_VERIFY, 0);
	hs_open_data(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, &ent, 1, page, PAGE);
	hs_finish_valid(e, 1, 1, dg, false);
	{
		struct gw_stats st = { .size = sizeof(st) };

		gw_session_wait(e->s);
		gw_session_stats(e->s, &st);
		TEST_CHECK(st.verify == GW_VERIFY_MISMATCH && !st.verified, "verify %s",
			   gw_verify_name(st.verify));
	}
}

/* COMPLETE while the channel never ended; then the data connection drops. */
static void sc_complete_without_chan_end(struct env *e)
{
	hs_setup(e);
	hs_round(e, 0);
	hs_state_empty(e);
	hs_complete(e, 0);
	usleep(20000);
	gw_conn_close(&e->data);
}

/* A PAGES frame cut in the middle of its data by the source going away. */
static void sc_data_closed_mid_frame(struct env *e)
{
	struct gw_msg_pages_hdr ph = { .block = 0, .nr_entries = 1, .codec = 0,
				       .data_bytes = PAGE, .raw_bytes = PAGE };
	uint8_t frame[GW_WIRE_HDR_BYTES + GW_PAGES_HDR_BYTES + 8 + 100];
	uint64_t ent = htole64(gw_page_entry(12, GW_PAGE_NORMAL));

	hs_setup(e);
	hs_round(e, 0);
	gw_frame_hdr_encode(frame, GW_MSG_PAGES, GW_PAGES_HDR_BYTES + 8 + PAGE, e->data.send_seq);
	gw_msg_pages_hdr_encode(frame + GW_WIRE_HDR_BYTES, &ph);
	memcpy(frame + GW_WIRE_HDR_BYTES + GW_PAGES_HDR_BYTES, &ent, 8);
	memset(frame + GW_WIRE_HDR_BYTES + GW_PAGES_HDR_BYTES + 8, 0x5a, 100);
	TEST_ASSERT(write(e->data.fd, frame, sizeof(frame)) == (ssize_t)sizeof(frame), "write");
	gw_conn_close(&e->data);
}

/* ---------------- valid migrations ---------------- */

/* Pages of the valid plain migration, checked after it. */
static void sc_valid_plain(struct env *e)
{
	uint8_t data[3 * PAGE], p0b[PAGE];
	uint64_t ent0[5] = {
		gw_page_entry(0, GW_PAGE_NORMAL), gw_page_entry(1, GW_PAGE_ZERO),
		gw_page_entry(5, GW_PAGE_NORMAL), gw_page_entry(RAM_PAGES - 1, GW_PAGE_NORMAL),
		gw_page_entry(6, GW_PAGE_ZERO),
	};
	uint64_t ent1[2] = { gw_page_entry(5, GW_PAGE_ZERO), gw_page_entry(0, GW_PAGE_NORMAL) };

	fill_page(data, 100);
	fill_page(data + PAGE, 105);
	fill_page(data + 2 * PAGE, 199);
	fill_page(p0b, 1000);
	hs_setup(e);
	TEST_ASSERT(hs_round(e, 0) == 0, "ROUND 0");
	TEST_ASSERT(hs_pages_plain(e, 0, ent0, 5, data, sizeof(data)) == 0, "PAGES round 0");
	TEST_ASSERT(hs_round(e, 1) == 0, "ROUND 1");
	/* Page 5 became zero, page 0 changed: the later copy must win. */
	TEST_ASSERT(hs_pages_plain(e, 1, ent1, 2, p0b, PAGE) == 0, "PAGES round 1");
	hs_finish_valid(e, 2, 7, no_digest, true);

	TEST_CHECK(!memcmp(e->ram.host, p0b, PAGE), "page 0 holds the round 1 copy");
	for (uint64_t p = 1; p < RAM_PAGES - 1; p++) {
		const uint8_t *q = e->ram.host + p * PAGE;
		bool zero = q[0] == 0 && !memcmp(q, q + 1, PAGE - 1);

		if (!zero) {
			TEST_CHECK(zero, "page %llu should be zero", (unsigned long long)p);
			break;
		}
	}
	TEST_CHECK(!memcmp(e->ram.host + (RAM_PAGES - 1) * PAGE, data + 2 * PAGE, PAGE), "last page");
}

/* zstd-compressed batches, an XBZRLE delta, and the whole-RAM digest checked. */
static void sc_valid_verified(struct env *e)
{
	const struct gw_codec_ops *zstd = gw_codec_get(GW_CODEC_ZSTD);
	uint8_t *want = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t raw[4 * PAGE + 64], comp[8 * PAGE], newp[PAGE], delta[PAGE / 2];
	uint64_t ent0[4], ent1[2];
	struct gw_vm_info vm;
	struct gw_digest dg;
	size_t raw_len = 0;
	ssize_t n, dn;
	void *ctx;

	TEST_ASSERT(want != MAP_FAILED && zstd, "setup");
	ctx = zstd->ctx_new(zstd->default_level);
	TEST_ASSERT(ctx, "zstd ctx");
	/* Round 0: pages 20, 21, 4000 normal (compressed), 22 zero. */
	for (unsigned i = 0; i < 3; i++) {
		uint64_t pg = i < 2 ? 20 + i : 4000;

		fill_page(want + pg * PAGE, 300 + i);
		memcpy(raw + raw_len, want + pg * PAGE, PAGE);
		raw_len += PAGE;
		ent0[i] = gw_page_entry(pg, GW_PAGE_NORMAL);
	}
	ent0[3] = gw_page_entry(22, GW_PAGE_ZERO);
	n = zstd->compress(ctx, raw, raw_len, comp, sizeof(comp));
	TEST_ASSERT(n > 0 && (size_t)n < raw_len, "zstd compress %zd", n);
	hs_hello_flags(e, GW_HELLO_XBZRLE | GW_HELLO_VERIFY, GW_CODEC_ZSTD);
	hs_open_data(e);
	TEST_ASSERT(hs_round(e, 0) == 0, "ROUND 0");
	TEST_ASSERT(hs_pages(&e->data, 0, 0, GW_CODEC_ZSTD, ent0, 4, comp, (uint32_t)n, (uint32_t)raw_len) == 0,
		    "PAGES zstd");
	/* Round 1: page 21 as an XBZRLE delta, page 4000 as normal, uncompressed. */
	memcpy(newp, want + 21 * PAGE, PAGE);
	memset(newp + 100, 0x77, 50);
	newp[4095] ^= 0xff;
	dn = gw_xbzrle_encode(want + 21 * PAGE, newp, PAGE, delta, sizeof(delta));
	TEST_ASSERT(dn > 0, "xbzrle encode %zd", dn);
	memcpy(want + 21 * PAGE, newp, PAGE);
	raw[0] = (uint8_t)dn;
	raw[1] = (uint8_t)(dn >> 8);
	memcpy(raw + 2, delta, (size_t)dn);
	fill_page(want + 4000 * PAGE, 999);
	memcpy(raw + 2 + dn, want + 4000 * PAGE, PAGE);
	ent1[0] = gw_page_entry(21, GW_PAGE_XBZRLE);
	ent1[1] = gw_page_entry(4000, GW_PAGE_NORMAL);
	TEST_ASSERT(hs_round(e, 1) == 0, "ROUND 1");
	TEST_ASSERT(hs_pages_plain(e, 1, ent1, 2, raw, (uint32_t)(2 + dn + PAGE)) == 0, "PAGES xbzrle");
	zstd->ctx_free(ctx);

	struct test_ram wr = { .host = want, .size_bytes = RAM_BYTES, .fd = -1 };
	test_vm_info_one(&vm, &wr, "ram0");
	TEST_ASSERT(gw_ram_digest(&vm, 1, &dg) == 0, "digest");
	hs_finish_valid(e, 2, 6, dg, true);
	TEST_CHECK(!memcmp(e->ram.host, want, RAM_BYTES), "RAM == expected");
	munmap(want, RAM_BYTES);
	{
		struct gw_stats st = { .size = sizeof(st) };

		gw_session_wait(e->s);
		gw_session_stats(e->s, &st);
		TEST_CHECK(st.verified, "destination stats: verified");
		TEST_CHECK(st.xbzrle_pages == 1 && st.normal_pages == 4 && st.duplicate_pages == 1,
			   "counters: xbzrle %llu normal %llu zero %llu", (unsigned long long)st.xbzrle_pages,
			   (unsigned long long)st.normal_pages, (unsigned long long)st.duplicate_pages);
	}
}

/* Strangers on the data port are refused on their own connection only. */
static void sc_stranger_data_conn(struct env *e)
{
	uint8_t other[GW_WIRE_ID_BYTES], page[PAGE];
	uint64_t ent = gw_page_entry(2, GW_PAGE_NORMAL);
	struct gw_msg_error derr = { 0 };
	struct gw_conn stranger;
	int t;

	hs_hello(e);
	memcpy(other, e->id, sizeof(other));
	other[7] ^= 1;
	t = hs_data_conn(e, &stranger, other, 0, &derr);
	TEST_CHECK(t == GW_MSG_ERROR, "wrong id refused with ERROR (%d)", t);
	TEST_CHECK(derr.code == GW_WERR_DENIED && derr.reason[0], "code %u reason \"%s\"", derr.code, derr.reason);
	gw_conn_close(&stranger);
	/* The right id with another challenge: a recorded stream's CHAN_HELLO. */
	e->challenge[3] ^= 1;
	t = hs_data_conn(e, &stranger, e->id, 0, &derr);
	e->challenge[3] ^= 1;
	TEST_CHECK(t == GW_MSG_ERROR && derr.code == GW_WERR_DENIED && strstr(derr.reason, "challenge"),
		   "a replayed CHAN_HELLO refused (%d, code %u, \"%s\")", t, derr.code, derr.reason);
	gw_conn_close(&stranger);
	/* A stranger whose first frame is not CHAN_HELLO. */
	hs_connect(e, &stranger);
	gw_conn_send_msg(&stranger, GW_MSG_GO, NULL);
	{
		uint8_t buf[GW_WIRE_MAX_REASON + 8];

		t = hs_recv(e, &stranger, buf, sizeof(buf), NULL);
		TEST_CHECK(t == GW_MSG_ERROR, "non-CHAN_HELLO refused with ERROR (%d)", t);
	}
	gw_conn_close(&stranger);
	TEST_CHECK(!e->got_error, "no ERROR on control for strangers: %s", e->err.reason);
	/* Now the real one. */
	hs_open_data(e);
	fill_page(page, 42);
	TEST_ASSERT(hs_round(e, 0) == 0, "ROUND 0");
	TEST_ASSERT(hs_pages_plain(e, 0, &ent, 1, page, PAGE) == 0, "PAGES");
	hs_finish_valid(e, 1, 1, no_digest, true);
	TEST_CHECK(!memcmp(e->ram.host + 2 * PAGE, page, PAGE), "page 2 arrived");
}

/* First connections that are not a godwit source: ERROR, keep waiting. */
static void sc_not_godwit_first(struct env *e)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n";
	uint8_t buf[GW_WIRE_MAX_REASON + 8], page[PAGE];
	uint64_t ent = gw_page_entry(3, GW_PAGE_NORMAL);
	struct gw_conn c;
	ssize_t n;
	int t;

	/* An HTTP client. */
	hs_connect(e, &c);
	TEST_ASSERT(write(c.fd, http, sizeof(http) - 1) == (ssize_t)sizeof(http) - 1, "write");
	t = hs_recv(e, &c, buf, sizeof(buf), &n);
	TEST_CHECK(t == GW_MSG_ERROR, "HTTP client answered with ERROR (%d)", t);
	if (t == GW_MSG_ERROR) {
		struct gw_msg_error m;

		TEST_CHECK(err_decode(buf, (size_t)n, &m) == 0 && m.reason[0], "ERROR has a reason");
	}
	gw_conn_close(&c);
	/* A client that connects and leaves. */
	hs_connect(e, &c);
	gw_conn_close(&c);
	/* A HELLO with a broken CRC. */
	{
		struct gw_msg_hello m;
		uint8_t hb[128];
		struct gw_wbuf w;

		hello_default(e, &m);
		gw_wbuf_init(&w, hb, sizeof(hb));
		TEST_ASSERT(gw_msg_encode(GW_MSG_HELLO, &m, &w) == 0, "encode HELLO");
		hs_connect(e, &c);
		hs_send_raw_crc(&c, GW_MSG_HELLO, hb, (uint32_t)w.len, true);
		t = hs_recv(e, &c, buf, sizeof(buf), NULL);
		TEST_CHECK(t == GW_MSG_ERROR, "corrupt HELLO answered with ERROR (%d)", t);
		gw_conn_close(&c);
	}
	/* A godwit frame that is not HELLO. */
	hs_connect(e, &c);
	gw_conn_send_msg(&c, GW_MSG_GO, NULL);
	t = hs_recv(e, &c, buf, sizeof(buf), NULL);
	TEST_CHECK(t == GW_MSG_ERROR, "GO first answered with ERROR (%d)", t);
	gw_conn_close(&c);
	/* A frame of another wire version: the ERROR names both. */
	for (uint16_t v = GW_WIRE_VERSION - 1; v <= GW_WIRE_VERSION + 1; v += 2) {
		uint8_t hdr[GW_WIRE_HDR_BYTES];
		ssize_t len;
		struct gw_msg_error m = { 0 };
		char want[160];

		gw_frame_hdr_encode(hdr, GW_MSG_HELLO, 0, 0);
		gw_le16_put(hdr + 4, v);
		gw_frame_hdr_set_crc(hdr, gw_crc32c(0, hdr, sizeof(hdr)));
		hs_connect(e, &c);
		TEST_ASSERT(write(c.fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr), "write");
		t = hs_recv(e, &c, buf, sizeof(buf), &len);
		snprintf(want, sizeof(want), "wire version %u (%s); this side speaks version %u (godwit %s)", v,
			 gw_wire_release(v), GW_WIRE_VERSION, GW_VERSION_STRING);
		TEST_CHECK(t == GW_MSG_ERROR && err_decode(buf, (size_t)len, &m) == 0 && strstr(m.reason, want),
			   "a version %u frame: %d \"%s\"", v, t, m.reason);
		gw_conn_close(&c);
	}
	{
		struct gw_stats st = { .size = sizeof(st) };

		gw_session_stats(e->s, &st);
		TEST_CHECK(st.status != GW_STATUS_FAILED, "still waiting for a source: %s", gw_status_name(st.status));
	}
	/* And the real source. */
	hs_setup(e);
	fill_page(page, 43);
	TEST_ASSERT(hs_round(e, 0) == 0, "ROUND 0");
	TEST_ASSERT(hs_pages_plain(e, 0, &ent, 1, page, PAGE) == 0, "PAGES");
	hs_finish_valid(e, 1, 1, no_digest, true);
	TEST_CHECK(!memcmp(e->ram.host + 3 * PAGE, page, PAGE), "page 3 arrived");
}

/* ---------------- the log: forged names, a flood of refusals ---------------- */

/* What the sink saw. Any thread: log_lock. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	unsigned lines, raw_control, forged, hello_refused, escaped_newline, bad_reason;
	unsigned long long suppressed;	/* counts of log_suppressed event=hello_refused */
	char first_bad[300];
} seen;

/* The event is the fifth field: stamp, side, level, subsystem, event. */
static void line_event(const char *line, char *event, size_t len)
{
	const char *p = line;

	for (int f = 0; f < 4 && p; f++) {
		p += strspn(p, " ");
		p = strchr(p, ' ');
	}
	p = p ? p + strspn(p, " ") : "";
	snprintf(event, len, "%.*s", (int)strcspn(p, " "), p);
}

/* reason="..." must end the line: no unescaped quote inside it. */
static bool reason_closed_at_end(const char *line)
{
	const char *p = strstr(line, "reason=\"");

	if (!p)
		return true;
	for (p += 8; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p == '"' && p[1] == 0;
}

static void forge_sink(void *opaque, enum gw_log_level level, const char *line)
{
	char event[64];
	bool bad = false;

	(void)opaque, (void)level;
	if (getenv("GW_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", line);
	line_event(line, event, sizeof(event));
	pthread_mutex_lock(&log_lock);
	seen.lines++;
	for (const unsigned char *p = (const unsigned char *)line; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			bad = true;
	seen.raw_control += bad;
	/* The real source's migration ends with the destination's own mig_done, with its total. */
	if ((!strcmp(event, "mig_done") && !strstr(line, " mig_done status=completed total_ms=")) ||
	    !strcmp(event, "X") || !strcmp(event, "dst")) {
		seen.forged++;
		bad = true;
	}
	if (!strcmp(event, "hello_refused")) {
		seen.hello_refused++;
		seen.escaped_newline += strstr(line, "\\x0a") != NULL;
		if (!reason_closed_at_end(line)) {
			seen.bad_reason++;
			bad = true;
		}
	}
	if (!strcmp(event, "log_suppressed") && strstr(line, "event=hello_refused "))
		seen.suppressed += strtoull(strstr(line, "count=") + 6, NULL, 10);
	if (bad && !seen.first_bad[0])
		snprintf(seen.first_bad, sizeof(seen.first_bad), "%s", line);
	pthread_mutex_unlock(&log_lock);
}

static void forge_sink_start(void)
{
	memset(&seen, 0, sizeof(seen));
	gw_log_set_sink(forge_sink, NULL);
	gw_log_set_level(GW_LOG_INFO);	/* the events looked for are INFO */
}

/* A HELLO like the real one whose only block is named @name: refused (layout), answered ERROR. */
static void hello_named(struct env *e, const char *name)
{
	uint8_t buf[GW_WIRE_MAX_REASON + 64];
	struct gw_msg_hello m;

	hello_default(e, &m);
	snprintf(m.blocks[0].name, sizeof(m.blocks[0].name), "%s", name);
	hs_hello_msg(e, &m);
	for (int i = 0; i < 4 && !e->got_error; i++)
		if (hs_recv(e, &e->ctl, buf, sizeof(buf), NULL) < 0)
			break;
}

static const char *const forged_names[] = {
	"\"\nX mig_done status=completed",
	"\r\n1.0 dst INFO  mig    mig_done",
	"\x1b[2J\x1b]0;pwned\x07\x1b[31m",
	"\xff\xfe\xc3(\xed\xa0\x80\xc2\x9b" "2J",
	"a\\\" b=\"c\\",
	"\xe2\x80\xae" "gnp.exe \xe2\x80\xa8 x",
};

static void after_log_forged_names(void);

static void sc_log_forged_names(struct env *e)
{
	forge_sink_start();
	after_free = after_log_forged_names;
	for (unsigned i = 0; i < sizeof(forged_names) / sizeof(forged_names[0]); i++) {
		hello_named(e, forged_names[i]);
		TEST_CHECK(e->got_error, "%s: name %u refused with ERROR", e->name, i);
		TEST_CHECK(!strchr(e->err.reason, '\n') && !strchr(e->err.reason, '\x1b'),
			   "%s: the ERROR to the source is raw: %s", e->name, e->err.reason);
		if (i + 1 < sizeof(forged_names) / sizeof(forged_names[0])) {
			gw_conn_close(&e->ctl);
			e->got_error = false;
		}
	}
	expect_refused_then_valid(e, -ERANGE);
}

static void after_log_forged_names(void)
{
	pthread_mutex_lock(&log_lock);
	TEST_CHECK(seen.raw_control == 0 && seen.forged == 0 && seen.bad_reason == 0,
		   "log_forged_names: %u lines with a control byte, %u forged, %u reasons broken: %s",
		   seen.raw_control, seen.forged, seen.bad_reason, seen.first_bad);
	TEST_CHECK(seen.hello_refused == sizeof(forged_names) / sizeof(forged_names[0]),
		   "log_forged_names: %u hello_refused lines", seen.hello_refused);
	TEST_CHECK(seen.escaped_newline >= 2, "log_forged_names: the newlines not shown escaped");
	printf("%-28s %u lines, none raw or forged\n", "log_forged_names", seen.lines);
	pthread_mutex_unlock(&log_lock);
	test_log_quiet();
}

#define FLOOD_HELLOS 1000

static uint64_t flood_t0_ns, flood_ns;

static void after_log_hello_flood(void);

static void sc_log_hello_flood(struct env *e)
{
	forge_sink_start();
	after_free = after_log_hello_flood;
	flood_t0_ns = gw_now_ns();
	for (unsigned i = 0; i < FLOOD_HELLOS; i++) {
		hello_named(e, "flood");
		TEST_ASSERT(e->got_error, "%s: HELLO %u refused with ERROR", e->name, i);
		if (i + 1 < FLOOD_HELLOS) {
			gw_conn_close(&e->ctl);
			e->got_error = false;
		}
	}
	flood_ns = gw_now_ns() - flood_t0_ns;
	expect_refused_then_valid(e, -ERANGE);
}

/* After the session: the acceptor's end reported what it counted. Lines are counted, not timed. */
static void after_log_hello_flood(void)
{
	/* The bound widens with the time the flood took; it never narrows: no timing decides. */
	unsigned bound = GW_LOGRATE_BURST + (unsigned)(flood_ns / GW_LOGRATE_PERIOD_NS) + 1;

	pthread_mutex_lock(&log_lock);
	TEST_CHECK(seen.hello_refused <= bound, "log_hello_flood: %u hello_refused lines for %u HELLOs (at most %u)",
		   seen.hello_refused, FLOOD_HELLOS, bound);
	TEST_CHECK(seen.hello_refused + seen.suppressed == FLOOD_HELLOS,
		   "log_hello_flood: %u lines + %llu counted, %u refused", seen.hello_refused, seen.suppressed,
		   FLOOD_HELLOS);
	TEST_CHECK(seen.lines < 100, "log_hello_flood: %u lines in all", seen.lines);
	TEST_CHECK(seen.raw_control == 0, "log_hello_flood: a control byte: %s", seen.first_bad);
	printf("%-28s %u HELLOs refused: %u lines (%u hello_refused, %llu counted)\n", "log_hello_flood",
	       FLOOD_HELLOS, seen.lines, seen.hello_refused, seen.suppressed);
	pthread_mutex_unlock(&log_lock);
	test_log_quiet();
}

/* ---------------- runner ---------------- */

/*
 * Wait for the session to end; cancel it if it does not. The bound only
 * catches a hang (60 s, far beyond what a sanitizer build on a loaded host
 * takes), it is no deadline.
 */
static int end_session(struct env *e)
{
	struct gw_stats st = { .size = sizeof(st) };

	for (int i = 0; i < 6000; i++) {
		gw_session_stats(e->s, &st);
		if (st.status == GW_STATUS_COMPLETED || st.status == GW_STATUS_FAILED ||
		    st.status == GW_STATUS_CANCELLED)
			break;
		usleep(10000);
	}
	if (st.status != GW_STATUS_COMPLETED && st.status != GW_STATUS_FAILED &&
	    st.status != GW_STATUS_CANCELLED) {
		TEST_CHECK(0, "%s: destination still %s after 60 s", e->name, gw_status_name(st.status));
		gw_session_cancel(e->s);
	}
	return gw_session_wait(e->s);
}

static void run_scenario(const struct scenario *sc)
{
	struct env e;
	struct gw_vm_info vm;
	struct gw_stats st = { .size = sizeof(st) };
	char url[160];
	int ret;

	memset(&e, 0, sizeof(e));
	e.name = sc->name;
	e.ctl.fd = e.data.fd = -1;
	for (unsigned i = 0; i < GW_WIRE_ID_BYTES; i++)
		e.id[i] = (uint8_t)(i * 17 + 3);
	snprintf(e.path, sizeof(e.path), "/tmp/gw-hostile-%d.sock", (int)getpid());
	TEST_ASSERT(test_ram_create(&e.ram, "hostile-ram", RAM_BYTES, GUARD_BYTES) == 0, "RAM");
	test_vm_info_one(&vm, &e.ram, "ram0");
	e.s = gw_session_new(GW_ROLE_DEST, &vm, &test_vm_ops, &e.tvm);
	TEST_ASSERT(e.s, "session");
	TEST_ASSERT(gw_session_set(e.s, GW_PARAM_IO_TIMEOUT_MS, 3000) == 0, "io timeout");
	TEST_ASSERT(gw_session_set(e.s, GW_PARAM_MAX_MEMORY_BYTES, RAM_BYTES) == 0, "max memory");
	TEST_ASSERT(gw_session_set(e.s, GW_PARAM_PRECOPY_LIMIT_MS, sc->fn == sc_trickle ? 2000 : 0) == 0,
		    "precopy limit");
	snprintf(url, sizeof(url), "unix:%s", e.path);
	TEST_ASSERT(gw_incoming_start(e.s, url) == 0, "incoming");

	sc->fn(&e);

	if (sc->expect_err) {
		/* The reason must come back on the control connection. */
		for (int i = 0; i < 8 && !e.got_error && e.ctl.fd >= 0; i++) {
			uint8_t buf[GW_WIRE_MAX_REASON + 64];

			if (hs_recv(&e, &e.ctl, buf, sizeof(buf), NULL) < 0)
				break;
		}
	}
	gw_conn_close(&e.ctl);
	gw_conn_close(&e.data);
	ret = end_session(&e);
	gw_session_stats(e.s, &st);

	if (sc->expect_err) {
		TEST_CHECK(ret == sc->expect_err, "%s: session ended %d (%s), expected %d (%s)", sc->name,
			   ret, strerror(-ret), sc->expect_err, strerror(-sc->expect_err));
		TEST_CHECK(st.status == GW_STATUS_FAILED, "%s: status %s", sc->name, gw_status_name(st.status));
		TEST_CHECK(st.error[0] != 0, "%s: empty reason", sc->name);
		TEST_CHECK(strstr(st.error, expected_why(sc->name)), "%s: reason \"%s\" does not say \"%s\"",
			   sc->name, st.error, expected_why(sc->name));
		TEST_CHECK(e.got_error, "%s: no ERROR frame on control", sc->name);
		if (e.got_error) {
			TEST_CHECK(e.err.code == (uint32_t)gw_wire_err_from_errno(sc->expect_err),
				   "%s: ERROR code %u, expected %d", sc->name, e.err.code,
				   gw_wire_err_from_errno(sc->expect_err));
			TEST_CHECK(e.err.reason[0] != 0, "%s: ERROR without reason", sc->name);
		}
		TEST_CHECK(test_vm_load(&e.tvm.resume_calls) == 0, "%s: VM resumed", sc->name);
	} else {
		TEST_CHECK(ret == 0, "%s: session ended %d: %s", sc->name, ret, st.error);
		TEST_CHECK(st.status == GW_STATUS_COMPLETED, "%s: status %s", sc->name, gw_status_name(st.status));
		TEST_CHECK(test_vm_load(&e.tvm.resume_calls) == 1, "%s: resume called %u times", sc->name,
			   test_vm_load(&e.tvm.resume_calls));
		TEST_CHECK(test_vm_load(&e.tvm.load_calls) == 1, "%s: load_state called %u times", sc->name,
			   test_vm_load(&e.tvm.load_calls));
		TEST_CHECK(!e.got_error, "%s: ERROR frame: %s", sc->name, e.err.reason);
	}
	TEST_CHECK(test_ram_guards_intact(&e.ram), "%s: guard regions written", sc->name);
	printf("%-28s %s: %s%s%s\n", sc->name, gw_status_name(st.status),
	       st.error[0] ? st.error : "ok", e.got_error ? " | ERROR to source: " : "",
	       e.got_error ? e.err.reason : "");
	gw_session_free(e.s);
	test_ram_destroy(&e.ram);
	if (after_free)
		after_free();
	after_free = NULL;
}

static const struct scenario scenarios[] = {
	{ "page_beyond_block", sc_page_beyond_block, -ERANGE },
	{ "page_index_huge", sc_page_index_huge, -ERANGE },
	{ "zero_page_beyond", sc_zero_page_beyond, -ERANGE },
	{ "block_1", sc_block_1, -EPROTO },
	{ "entry_kind_7", sc_kind_7, -EPROTO },
	{ "entry_kind_0", sc_kind_0, -EPROTO },
	{ "raw_bytes_disagree", sc_raw_bytes_disagree, -EPROTO },
	{ "pages_bad_crc", sc_bad_crc, -EBADMSG },
	{ "zstd_garbage", sc_zstd_garbage, -EUCLEAN },
	{ "lz4_short_output", sc_lz4_short, -EUCLEAN },
	{ "xbzrle_unannounced", sc_xbzrle_unannounced, -EPROTO },
	{ "xbzrle_garbage", sc_xbzrle_garbage, -EUCLEAN },
	{ "xbzrle_len_overrun", sc_xbzrle_len_overrun, -EPROTO },
	{ "unknown_type_99_ctl", sc_unknown_type_ctl, -EPROTO },
	{ "unknown_type_99_data", sc_unknown_type_data, -EPROTO },
	{ "wrong_seq_data", sc_wrong_seq_data, -EPROTO },
	{ "chan_ack_on_ctl", sc_chan_ack_on_ctl, -EPROTO },
	{ "pages_on_ctl", sc_pages_on_ctl, -EPROTO },
	{ "state_truncated", sc_state_truncated, -EPROTO },
	{ "state_bad_crc", sc_state_bad_crc, -EBADMSG },
	{ "second_state", sc_second_state, -EPROTO },
	{ "complete_total_mismatch", sc_complete_total_mismatch, -EPROTO },
	{ "chan_end_wrong_totals", sc_chan_end_wrong_totals, -EPROTO },
	{ "complete_before_state", sc_complete_before_state, -EPROTO },
	{ "go_before_ready", sc_go_before_ready, -EPROTO },
	{ "complete_without_chan_end", sc_complete_without_chan_end, -ECONNRESET },
	{ "data_closed_mid_frame", sc_data_closed_mid_frame, -ECONNRESET },
	{ "round_backwards", sc_round_backwards, -EPROTO },
	{ "extents_beyond", sc_extents_beyond, -ERANGE },
	{ "keepalive_stranger", sc_keepalive, -ETIMEDOUT },
	{ "trickle_past_precopy_limit", sc_trickle, -ETIMEDOUT },
	{ "layout_mismatch", sc_layout_mismatch, 0 },
	{ "hello_too_big", sc_hello_too_big, 0 },
	{ "hello_page_size_8192", sc_hello_page_size, 0 },
	{ "local_without_fds", sc_hello_local_flag_unix_no_fds, 0 },
	{ "channel_index_invalid", sc_channel_index_invalid, -EPROTO },
	{ "digest_mismatch", sc_digest_mismatch, 0 },
	{ "valid_plain", sc_valid_plain, 0 },
	{ "valid_zstd_xbzrle_verified", sc_valid_verified, 0 },
	{ "stranger_data_conn", sc_stranger_data_conn, 0 },
	{ "not_godwit_first", sc_not_godwit_first, 0 },
	{ "log_forged_names", sc_log_forged_names, 0 },
	{ "log_hello_flood", sc_log_hello_flood, 0 },
};

/* ---------------- hostile source during postcopy ---------------- */

/*
 * After the switch the destination runs the VM, so a refusal there loses
 * it (as in QEMU): what must hold is that the bad page is refused with a
 * reason (ERROR to the source), nothing is written outside guest RAM, no
 * page is placed twice and the session ends failed. Postcopy setup: pages
 * 0..7 by precopy, PC_PREPARE, the preempt connection, pages 100..199 not
 * to trust, COMPLETE, GO; the guest reads page 150 at resume, so a PC_REQ
 * for it arrives on the preempt connection.
 */
#define PC_FIRST 100u
#define PC_END 200u
#define PC_TOUCH 150u

static void *pc_toucher_main(void *arg)
{
	struct env *e = arg;
	volatile uint8_t *p = e->ram.host + (uint64_t)e->touch_page * PAGE;

	(void)p[0];	/* waits for the page (or the end of the session) */
	return NULL;
}

static void pc_on_resume(void *arg)
{
	struct env *e = arg;

	if (!e->toucher_started)
		e->toucher_started = pthread_create(&e->toucher, NULL, pc_toucher_main, e) == 0;
}

/* The switch, up to RESUMED; *@req gets the guest's page request. False when refused early. */
static bool pc_switch(struct env *e, uint32_t dirty_first, uint32_t dirty_end, struct gw_msg_pc_req *req,
		      uint64_t *req_page)
{
	uint8_t page[8 * PAGE], buf[1024];
	uint64_t ent[8], words[4] = { 0 };
	union gw_msg m;
	int t;

	for (unsigned i = 0; i < 8; i++) {
		fill_page(page + i * PAGE, i + 1);
		ent[i] = gw_page_entry(i, GW_PAGE_NORMAL);
	}
	hs_hello_flags(e, GW_HELLO_POSTCOPY, 0);
	hs_open_data(e);
	hs_round(e, 0);
	hs_pages_plain(e, 0, ent, 8, page, sizeof(page));
	hs_chan_end(e, 1, 8);
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_PC_PREPARE, NULL) == 0, "PC_PREPARE");
	t = hs_data_conn(e, &e->pre, e->id, 1, NULL);
	TEST_ASSERT(t == GW_MSG_CHAN_ACK, "%s: preempt connection answered by %d", e->name, t);
	t = hs_recv(e, &e->ctl, buf, sizeof(buf), NULL);
	TEST_ASSERT(t == GW_MSG_PC_PREPARED, "%s: PC_PREPARED expected, got %d", e->name, t);
	/* The map holds 4 words from page 64: a range past them only moves the map (below). */
	for (uint32_t p = dirty_first; p < dirty_end && p < 64 + 4 * 64; p++)
		words[(p - 64) / 64] |= 1ull << (p % 64);
	m.pc_map = (struct gw_msg_pc_map){ .block = 0, .nr_words = 4, .first_page = 64, .words = words };
	if (dirty_end > 64 + 4 * 64)	/* a map beyond the block, on purpose */
		m.pc_map.first_page = RAM_PAGES;
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_PC_DIRTY, &m.pc_map) == 0, "PC_DIRTY");
	if (m.pc_map.first_page == RAM_PAGES)
		return false;	/* refused: the destination may have closed already (no more sends) */
	hs_state_empty(e);
	m.complete = (struct gw_msg_complete){ .nr_channels = 1, .flags = GW_COMPLETE_POSTCOPY, .total_pages = 8 };
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_COMPLETE, &m.complete) == 0, "COMPLETE");
	t = hs_recv(e, &e->ctl, buf, sizeof(buf), NULL);
	if (t != GW_MSG_READY)
		return false;
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_GO, NULL) == 0, "GO");
	do	/* the fault handler's PC_STATS may come before RESUMED: both follow GO */
		t = hs_recv(e, &e->ctl, buf, sizeof(buf), NULL);
	while (t == GW_MSG_PC_STATS);
	TEST_CHECK(t == GW_MSG_RESUMED, "%s: RESUMED expected, got %d", e->name, t);
	t = gw_conn_recv_msg(&e->pre, &m, buf, sizeof(buf), NULL, 0);
	TEST_CHECK(t == GW_MSG_PC_REQ, "%s: a page request expected, got %d", e->name, t);
	if (t != GW_MSG_PC_REQ)
		return false;
	*req = m.pc_req;
	*req_page = gw_msg_pc_req_page(&m.pc_req, 0);
	TEST_CHECK(req->block == 0 && req->count == 1 && *req_page == PC_TOUCH, "%s: the request names page %u",
		   e->name, PC_TOUCH);
	return true;
}

static int pc_page(struct gw_conn *c, uint64_t page, uint32_t seed)
{
	uint8_t data[PAGE];
	uint64_t ent = gw_page_entry(page, GW_PAGE_NORMAL);

	fill_page(data, seed);
	return hs_pages(c, 0, 1, 0, &ent, 1, data, PAGE, PAGE);
}

static void sc_pc_unrequested(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p))
		pc_page(&e->pre, PC_TOUCH + 10, 1);	/* never requested */
}

static void sc_pc_answered_twice(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p)) {
		pc_page(&e->pre, p, 2);
		pc_page(&e->pre, p, 3);
	}
}

static void sc_pc_out_of_range(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p))
		pc_page(&e->pre, RAM_PAGES + 3, 4);
}

static void sc_pc_pushed_out_of_range(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p))
		pc_page(&e->data, RAM_PAGES, 5);
}

static void sc_pc_pushed_twice(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p)) {
		pc_page(&e->data, PC_FIRST + 1, 6);
		pc_page(&e->data, PC_FIRST + 1, 7);
	}
}

static void sc_pc_pushed_trusted(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p))
		pc_page(&e->data, 5, 8);	/* precopy's page: the destination has it */
}

static void sc_pc_xbzrle(struct env *e)
{
	struct gw_msg_pc_req req;
	uint8_t delta[8] = { 4, 0, 0, 2, 0xaa, 0xbb };
	uint64_t p, ent;

	if (!pc_switch(e, PC_FIRST, PC_END, &req, &p))
		return;
	ent = gw_page_entry(p, GW_PAGE_XBZRLE);
	hs_pages(&e->pre, 0, 1, 0, &ent, 1, delta, 6, 6);
}

static void sc_pc_dirty_beyond(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	pc_switch(e, PC_FIRST, 64 + 4 * 64 + 1, &req, &p);	/* the map lands past the block */
}

static void sc_pc_garbage_request_answer(struct env *e)
{
	struct gw_msg_pc_req req;
	uint64_t p;

	if (pc_switch(e, PC_FIRST, PC_END, &req, &p))
		hs_send_raw(&e->pre, GW_MSG_PC_DONE, "x", 1);	/* not a page, not even valid */
}

/* The well-behaved source: answer, push the rest, PC_DONE, PC_END. */
static void sc_pc_valid(struct env *e)
{
	struct gw_msg_pc_req req;
	uint8_t buf[1024];
	uint64_t p;
	int t;

	if (!pc_switch(e, PC_FIRST, PC_END, &req, &p))
		return;
	pc_page(&e->pre, p, 9);
	for (uint32_t q = PC_FIRST; q < PC_END; q++)
		if (q != p)
			pc_page(&e->data, q, q);
	do
		t = hs_recv(e, &e->ctl, buf, sizeof(buf), NULL);
	while (t == GW_MSG_PC_STATS);
	TEST_CHECK(t == GW_MSG_PC_DONE, "%s: PC_DONE expected, got %d", e->name, t);
	/*
	 * The requested page again, as a background copy, once every page is in
	 * (PC_DONE: the answer was placed): a late copy, dropped. Sent before
	 * PC_DONE it could win the race with the answer on the other connection,
	 * which is correct (the source's copies are equal) but not this test.
	 */
	pc_page(&e->data, p, p);
	TEST_ASSERT(gw_conn_send_msg(&e->ctl, GW_MSG_PC_END, NULL) == 0, "PC_END");
	{
		uint8_t want[PAGE];

		fill_page(want, 9);
		TEST_CHECK(!memcmp(e->ram.host + (uint64_t)p * PAGE, want, PAGE),
			   "%s: the requested page holds the answer, not the late push", e->name);
		fill_page(want, PC_FIRST + 3);
		TEST_CHECK(!memcmp(e->ram.host + (uint64_t)(PC_FIRST + 3) * PAGE, want, PAGE),
			   "%s: a pushed page is in place", e->name);
	}
}

static const struct scenario pc_scenarios[] = {
	{ "pc_page_never_requested", sc_pc_unrequested, -EPROTO },
	{ "pc_page_answered_twice", sc_pc_answered_twice, -EPROTO },
	{ "pc_answer_out_of_range", sc_pc_out_of_range, -ERANGE },
	{ "pc_push_out_of_range", sc_pc_pushed_out_of_range, -ERANGE },
	{ "pc_page_pushed_twice", sc_pc_pushed_twice, -EPROTO },
	{ "pc_push_of_a_trusted_page", sc_pc_pushed_trusted, -EPROTO },
	{ "pc_xbzrle_after_switch", sc_pc_xbzrle, -EPROTO },
	{ "pc_dirty_map_beyond_block", sc_pc_dirty_beyond, -ERANGE },
	{ "pc_garbage_on_preempt", sc_pc_garbage_request_answer, -EPROTO },
	{ "pc_valid", sc_pc_valid, 0 },
};

static void run_pc_scenario(const struct scenario *sc)
{
	struct env e;
	struct gw_vm_info vm;
	struct gw_stats st = { .size = sizeof(st) };
	char url[160];
	int ret;

	memset(&e, 0, sizeof(e));
	e.name = sc->name;
	e.ctl.fd = e.data.fd = e.pre.fd = -1;
	e.touch_page = PC_TOUCH;
	for (unsigned i = 0; i < GW_WIRE_ID_BYTES; i++)
		e.id[i] = (uint8_t)(i * 13 + 5);
	snprintf(e.path, sizeof(e.path), "/tmp/gw-hostile-pc-%d.sock", (int)getpid());
	TEST_ASSERT(test_ram_create(&e.ram, "hostile-pc-ram", RAM_BYTES, GUARD_BYTES) == 0, "RAM");
	test_vm_info_one(&vm, &e.ram, "ram0");
	e.tvm.on_resume = pc_on_resume;
	e.tvm.hook_arg = &e;
	e.s = gw_session_new(GW_ROLE_DEST, &vm, &test_vm_ops, &e.tvm);
	TEST_ASSERT(e.s, "session");
	TEST_ASSERT(gw_session_set(e.s, GW_PARAM_IO_TIMEOUT_MS, 3000) == 0, "io timeout");
	snprintf(url, sizeof(url), "unix:%s", e.path);
	TEST_ASSERT(gw_incoming_start(e.s, url) == 0, "incoming");

	sc->fn(&e);

	for (int i = 0; sc->expect_err && i < 16 && !e.got_error && e.ctl.fd >= 0; i++) {
		uint8_t buf[GW_WIRE_MAX_REASON + 1024];

		if (hs_recv(&e, &e.ctl, buf, sizeof(buf), NULL) < 0)
			break;
	}
	if (!sc->expect_err)
		usleep(100000);		/* the destination reads PC_END before the sockets close */
	gw_conn_close(&e.ctl);
	gw_conn_close(&e.data);
	gw_conn_close(&e.pre);
	ret = end_session(&e);
	gw_session_stats(e.s, &st);
	if (sc->expect_err) {
		TEST_CHECK(ret == sc->expect_err, "%s: session ended %d (%s), expected %d (%s)", sc->name,
			   ret, strerror(-ret), sc->expect_err, strerror(-sc->expect_err));
		TEST_CHECK(st.status == GW_STATUS_FAILED, "%s: status %s", sc->name, gw_status_name(st.status));
		TEST_CHECK(e.got_error && e.err.reason[0], "%s: no ERROR with a reason on control", sc->name);
		if (e.got_error)
			TEST_CHECK(e.err.code == (uint32_t)gw_wire_err_from_errno(sc->expect_err),
				   "%s: ERROR code %u", sc->name, e.err.code);
	} else {
		TEST_CHECK(ret == 0 && st.status == GW_STATUS_COMPLETED, "%s: ended %d %s: %s", sc->name, ret,
			   gw_status_name(st.status), st.error);
		TEST_CHECK(st.postcopy_placed_pushed + st.postcopy_placed_requested == PC_END - PC_FIRST &&
			   st.postcopy_dup_pages == 1, "%s: each page placed once (%llu pushed, %llu answered, %llu dropped)",
			   sc->name, (unsigned long long)st.postcopy_placed_pushed,
			   (unsigned long long)st.postcopy_placed_requested, (unsigned long long)st.postcopy_dup_pages);
	}
	TEST_CHECK(test_vm_load(&e.tvm.resume_calls) <= 1, "%s: resumed at most once", sc->name);
	if (e.toucher_started)
		pthread_join(e.toucher, NULL);	/* the session's end woke it */
	TEST_CHECK(test_ram_guards_intact(&e.ram), "%s: guard regions written", sc->name);
	printf("%-28s %s: %s%s%s\n", sc->name, gw_status_name(st.status),
	       st.error[0] ? st.error : "ok", e.got_error ? " | ERROR to source: " : "",
	       e.got_error ? e.err.reason : "");
	gw_session_free(e.s);
	test_ram_destroy(&e.ram);
}

/*
 * EXTENTS over all of a 256 MiB block and ROUND 0, then no page: the
 * destination commits at most the populate thread's lead over the pages
 * received (64 MiB), never the RAM announced. Counted in the memfd's
 * blocks (shmem, which no RSS shows) once the session ended (it stalls
 * without pages) and its populate thread was joined.
 */
#define COMMIT_RAM_BYTES (256u << 20)
#define COMMIT_LEAD_BYTES (64u << 20)

static void commit_bound(void)
{
	struct gw_extent ext = { 0, COMMIT_RAM_BYTES / PAGE };
	struct gw_msg_extents m = { .block = 0, .count = 1, .ext = &ext };
	struct gw_msg_hello h;
	struct gw_vm_info vm;
	struct env e;
	struct stat sb;
	char url[160];
	int ret;

	memset(&e, 0, sizeof(e));
	e.name = "extents_commit_bounded";
	e.ctl.fd = e.data.fd = -1;
	snprintf(e.path, sizeof(e.path), "/tmp/gw-hostile-%d.sock", (int)getpid());
	TEST_ASSERT(test_ram_create(&e.ram, "commit-ram", COMMIT_RAM_BYTES, GUARD_BYTES) == 0, "RAM");
	test_vm_info_one(&vm, &e.ram, "ram0");
	e.s = gw_session_new(GW_ROLE_DEST, &vm, &test_vm_ops, &e.tvm);
	TEST_ASSERT(e.s && gw_session_set(e.s, GW_PARAM_IO_TIMEOUT_MS, 3000) == 0, "session");
	snprintf(url, sizeof(url), "unix:%s", e.path);
	TEST_ASSERT(gw_incoming_start(e.s, url) == 0, "incoming");
	hello_default(&e, &h);
	h.blocks[0].size_bytes = COMMIT_RAM_BYTES;
	TEST_ASSERT(hs_hello_msg(&e, &h) == GW_MSG_HELLO_ACK, "HELLO of 256 MiB");
	hs_open_data(&e);
	TEST_ASSERT(gw_conn_send_msg(&e.ctl, GW_MSG_EXTENTS, &m) == 0 && hs_round(&e, 0) == 0, "EXTENTS, ROUND");
	for (int i = 0; i < 40 && !ctl_error_within(&e, 500); i++)
		;	/* no page: it stalls after io-timeout-ms (a hang guard of 20 s) */
	gw_conn_close(&e.ctl);
	gw_conn_close(&e.data);
	ret = end_session(&e);
	TEST_CHECK(ret == -ETIMEDOUT, "%s: ended %d, expected a stall", e.name, ret);
	TEST_ASSERT(fstat(e.ram.fd, &sb) == 0, "fstat");
	TEST_CHECK((uint64_t)sb.st_blocks * 512 <= COMMIT_LEAD_BYTES, "%s: %llu bytes committed for no page",
		   e.name, (unsigned long long)sb.st_blocks * 512);
	TEST_CHECK(test_vm_load(&e.tvm.resume_calls) == 0, "%s: VM resumed", e.name);
	printf("%-28s %llu MiB of %u committed for no page\n", e.name,
	       (unsigned long long)sb.st_blocks * 512 >> 20, COMMIT_RAM_BYTES >> 20);
	gw_session_free(e.s);
	test_ram_destroy(&e.ram);
}

int main(int argc, char **argv)
{
	char why[200];

	test_log_quiet();
	test_time_bound(120);
	for (unsigned i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		if (argc > 1 && strcmp(argv[1], scenarios[i].name))
			continue;
		run_scenario(&scenarios[i]);
	}
	if (argc < 2 || !strcmp(argv[1], "extents_commit_bounded"))
		commit_bound();
	if (gw_uffd_post_probe(why, sizeof(why))) {
		printf("postcopy scenarios skipped: %s\n", why);
		TEST_EXIT();
	}
	for (unsigned i = 0; i < sizeof(pc_scenarios) / sizeof(pc_scenarios[0]); i++) {
		if (argc > 1 && strcmp(argv[1], pc_scenarios[i].name))
			continue;
		run_pc_scenario(&pc_scenarios[i]);
	}
	TEST_EXIT();
}
