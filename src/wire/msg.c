/* SPDX-License-Identifier: MIT */
/*
 * Typed wire messages: the only place where a payload layout is written
 * down (see wire/msg.h). Everything decoded here is hostile: each decoder
 * checks every field before the caller may use it, reserved fields must be
 * zero, and trailing bytes are refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "state.h"
#include "wire/frame.h"
#include "wire/msg.h"
#include "wire/msg_postcopy.h"

#define WHY(...) (why ? snprintf(why, why_len, __VA_ARGS__) : 0, -EPROTO)

/* ---- HELLO ---- */

static int hello_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_hello *m = msg;

	if (m->nr_blocks > GW_MAX_RAM_BLOCKS)
		return -EINVAL;
	gw_put_le32(w, m->min_version);
	gw_put_le32(w, m->max_version);
	gw_put_bytes(w, m->id, GW_WIRE_ID_BYTES);
	gw_put_bytes(w, m->boot_id, GW_WIRE_ID_BYTES);
	gw_put_le32(w, m->page_size_bytes);
	gw_put_le32(w, m->nr_channels);
	gw_put_le32(w, m->codec);
	gw_put_le32(w, (uint32_t)m->codec_level);
	gw_put_le32(w, m->flags);
	gw_put_le32(w, m->batch_pages);
	gw_put_le32(w, m->nr_blocks);
	for (uint32_t i = 0; i < m->nr_blocks; i++) {
		char name[GW_RAM_NAME_MAX] = { 0 };

		memcpy(name, m->blocks[i].name, strnlen(m->blocks[i].name, sizeof(name) - 1));
		gw_put_bytes(w, name, sizeof(name));
		gw_put_le64(w, m->blocks[i].gpa);
		gw_put_le64(w, m->blocks[i].size_bytes);
		gw_put_le32(w, m->blocks[i].page_size_bytes);
		gw_put_le32(w, 0);
	}
	return gw_wbuf_done(w);
}

static size_t hello_size(const void *msg)
{
	const struct gw_msg_hello *m = msg;

	return GW_MSG_HELLO_FIXED_BYTES + (size_t)m->nr_blocks * GW_MSG_HELLO_BLOCK_BYTES;
}

static int hello_check_fixed(const struct gw_msg_hello *m, char *why, size_t why_len)
{
	if (m->min_version > m->max_version || m->min_version == 0)
		return WHY("HELLO versions %u..%u invalid", m->min_version, m->max_version);
	if (m->page_size_bytes != GW_WIRE_PAGE_BYTES)
		return WHY("page size %u not supported (only %u)", m->page_size_bytes, GW_WIRE_PAGE_BYTES);
	if (m->nr_channels > GW_WIRE_MAX_CHANNELS ||
	    (m->nr_channels == 0) != ((m->flags & GW_HELLO_LOCAL) != 0))
		return WHY("channels %u invalid (1..%u; 0 exactly for local migration)",
			   m->nr_channels, GW_WIRE_MAX_CHANNELS);
	if (m->codec > GW_WIRE_CODEC__MAX)
		return WHY("codec %u unknown", m->codec);
	if (m->flags & ~GW_HELLO_FLAGS_ALL)
		return WHY("unknown HELLO flags 0x%x", m->flags & ~GW_HELLO_FLAGS_ALL);
	if (m->batch_pages < 1 || m->batch_pages > GW_WIRE_MAX_BATCH_PAGES)
		return WHY("batch of %u pages out of 1..%u", m->batch_pages, GW_WIRE_MAX_BATCH_PAGES);
	if (m->nr_blocks < 1 || m->nr_blocks > GW_MAX_RAM_BLOCKS)
		return WHY("%u RAM blocks out of 1..%u", m->nr_blocks, GW_MAX_RAM_BLOCKS);
	return 0;
}

static int hello_decode_block(struct gw_rbuf *r, struct gw_msg_hello *m, uint32_t i,
			      char *why, size_t why_len)
{
	const char *name = gw_get_bytes(r, GW_RAM_NAME_MAX);
	uint64_t gpa = gw_get_le64(r), size = gw_get_le64(r);
	uint32_t page_size = gw_get_le32(r), reserved = gw_get_le32(r);

	if (r->underrun)
		return WHY("HELLO truncated in block %u", i);
	if (!memchr(name, 0, GW_RAM_NAME_MAX) || !name[0])
		return WHY("block %u name not terminated or empty", i);
	if (reserved)
		return WHY("block %s: reserved field not zero", name);
	if (page_size != m->page_size_bytes)
		return WHY("block %s page size %u", name, page_size);
	if (size == 0 || size % page_size || size / page_size > (1ull << 40))
		return WHY("block %s size %llu invalid", name, (unsigned long long)size);
	if (gpa % page_size || gpa + size < gpa)
		return WHY("block %s gpa 0x%llx invalid", name, (unsigned long long)gpa);
	for (uint32_t j = 0; j < i; j++)
		if (!strcmp(m->blocks[j].name, name))
			return WHY("block name %s repeated", name);
	memcpy(m->blocks[i].name, name, GW_RAM_NAME_MAX);
	m->blocks[i].gpa = gpa;
	m->blocks[i].size_bytes = size;
	m->blocks[i].page_size_bytes = page_size;
	return 0;
}

static int hello_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_hello *m = msg;
	const void *id;
	int ret;

	memset(m, 0, sizeof(*m));
	m->min_version = gw_get_le32(r);
	m->max_version = gw_get_le32(r);
	id = gw_get_bytes(r, GW_WIRE_ID_BYTES);
	if (id)
		memcpy(m->id, id, GW_WIRE_ID_BYTES);
	id = gw_get_bytes(r, GW_WIRE_ID_BYTES);
	if (id)
		memcpy(m->boot_id, id, GW_WIRE_ID_BYTES);
	m->page_size_bytes = gw_get_le32(r);
	m->nr_channels = gw_get_le32(r);
	m->codec = gw_get_le32(r);
	m->codec_level = (int32_t)gw_get_le32(r);
	m->flags = gw_get_le32(r);
	m->batch_pages = gw_get_le32(r);
	m->nr_blocks = gw_get_le32(r);
	if (r->underrun)
		return WHY("HELLO truncated");
	ret = hello_check_fixed(m, why, why_len);
	for (uint32_t i = 0; !ret && i < m->nr_blocks; i++)
		ret = hello_decode_block(r, m, i, why, why_len);
	if (!ret && gw_rbuf_done(r))
		return WHY("HELLO has %zu trailing bytes", gw_rbuf_left(r));
	return ret;
}

/* ---- small fixed messages ---- */

static int hello_ack_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_hello_ack *m = msg;

	gw_put_le32(w, m->version);
	gw_put_le32(w, m->flags);
	gw_put_bytes(w, m->boot_id, GW_WIRE_ID_BYTES);
	return gw_wbuf_done(w);
}

static int hello_ack_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_hello_ack *m = msg;
	const void *boot;

	m->version = gw_get_le32(r);
	m->flags = gw_get_le32(r);
	boot = gw_get_bytes(r, GW_WIRE_ID_BYTES);
	if (boot)
		memcpy(m->boot_id, boot, GW_WIRE_ID_BYTES);
	if (!r->underrun && (m->flags & ~GW_HELLO_FLAGS_ALL))
		return WHY("unknown HELLO_ACK flags 0x%x", m->flags);
	return 0;
}

static int chan_hello_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_chan_hello *m = msg;

	gw_put_bytes(w, m->id, GW_WIRE_ID_BYTES);
	gw_put_le32(w, m->index);
	return gw_wbuf_done(w);
}

static int chan_hello_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_chan_hello *m = msg;
	const void *id = gw_get_bytes(r, GW_WIRE_ID_BYTES);

	if (id)
		memcpy(m->id, id, GW_WIRE_ID_BYTES);
	m->index = gw_get_le32(r);
	if (!r->underrun && m->index >= GW_WIRE_MAX_CHANNELS)
		return WHY("channel index %u out of range", m->index);
	return 0;
}

static int chan_ack_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le32(w, ((const struct gw_msg_chan_ack *)msg)->index);
	return gw_wbuf_done(w);
}

static int chan_ack_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_chan_ack *)msg)->index = gw_get_le32(r);
	(void)why, (void)why_len;
	return 0;
}

static int round_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_round *m = msg;

	gw_put_le32(w, m->round);
	gw_put_le32(w, 0);
	gw_put_le64(w, m->dirty_pages);
	return gw_wbuf_done(w);
}

static int round_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_round *m = msg;
	uint32_t reserved;

	m->round = gw_get_le32(r);
	reserved = gw_get_le32(r);
	m->dirty_pages = gw_get_le64(r);
	if (!r->underrun && reserved)
		return WHY("ROUND reserved field not zero");
	return 0;
}

static int chan_end_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_chan_end *m = msg;

	gw_put_le32(w, m->index);
	gw_put_le32(w, 0);
	gw_put_le64(w, m->frames);
	gw_put_le64(w, m->pages);
	return gw_wbuf_done(w);
}

static int chan_end_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_chan_end *m = msg;
	uint32_t reserved;

	m->index = gw_get_le32(r);
	reserved = gw_get_le32(r);
	m->frames = gw_get_le64(r);
	m->pages = gw_get_le64(r);
	if (!r->underrun && reserved)
		return WHY("CHAN_END reserved field not zero");
	return 0;
}

static int complete_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_complete *m = msg;

	gw_put_le32(w, m->nr_channels);
	gw_put_le32(w, m->flags);
	gw_put_le64(w, m->total_pages);
	return gw_wbuf_done(w);
}

static int complete_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_complete *m = msg;

	m->nr_channels = gw_get_le32(r);
	m->flags = gw_get_le32(r);
	m->total_pages = gw_get_le64(r);
	if (!r->underrun && (m->flags & ~GW_COMPLETE_FLAGS_ALL))
		return WHY("COMPLETE: unknown flags 0x%x", m->flags & ~GW_COMPLETE_FLAGS_ALL);
	if (!r->underrun && m->nr_channels > GW_WIRE_MAX_CHANNELS)
		return WHY("COMPLETE: %u channels", m->nr_channels);
	return 0;
}

static int ready_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le64(w, ((const struct gw_msg_ready *)msg)->load_ns);
	return gw_wbuf_done(w);
}

static int ready_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_ready *)msg)->load_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

static int resumed_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_resumed *m = msg;

	gw_put_le64(w, m->go_to_resume_ns);
	gw_put_le64(w, m->resume_mono_ns);
	return gw_wbuf_done(w);
}

static int resumed_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_resumed *m = msg;

	m->go_to_resume_ns = gw_get_le64(r);
	m->resume_mono_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

static int verify_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_verify *m = msg;

	gw_put_le64(w, m->digest_lo);
	gw_put_le64(w, m->digest_hi);
	gw_put_le64(w, m->verify_ns);
	return gw_wbuf_done(w);
}

static int verify_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_verify *m = msg;

	m->digest_lo = gw_get_le64(r);
	m->digest_hi = gw_get_le64(r);
	m->verify_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

static int verified_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_verified *m = msg;

	gw_put_le32(w, m->flags);
	gw_put_le32(w, 0);
	gw_put_le64(w, m->digest_lo);
	gw_put_le64(w, m->digest_hi);
	gw_put_le64(w, m->verify_ns);
	gw_put_le64(w, m->snapshot_faults);
	return gw_wbuf_done(w);
}

static int verified_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_verified *m = msg;
	uint32_t reserved;

	m->flags = gw_get_le32(r);
	reserved = gw_get_le32(r);
	m->digest_lo = gw_get_le64(r);
	m->digest_hi = gw_get_le64(r);
	m->verify_ns = gw_get_le64(r);
	m->snapshot_faults = gw_get_le64(r);
	if (!r->underrun && ((m->flags & ~GW_VERIFIED_FLAGS_ALL) || reserved))
		return WHY("VERIFIED: unknown flags 0x%x or reserved field not zero", m->flags);
	return 0;
}

static int ping_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le64(w, ((const struct gw_msg_ping *)msg)->token);
	return gw_wbuf_done(w);
}

static int ping_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_ping *)msg)->token = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

static int go_encode(struct gw_wbuf *w, const void *msg)
{
	(void)msg;
	return gw_wbuf_done(w);
}

static int go_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	(void)r, (void)msg, (void)why, (void)why_len;
	return 0;
}

/* ---- EXTENTS ---- */

static int extents_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_extents *m = msg;

	if (m->count < 1 || m->count > GW_WIRE_MAX_EXTENTS)
		return -EINVAL;
	gw_put_le32(w, m->block);
	gw_put_le32(w, m->count);
	for (uint32_t i = 0; i < m->count; i++) {
		gw_put_le64(w, m->ext[i].first_page);
		gw_put_le64(w, m->ext[i].nr_pages);
	}
	return gw_wbuf_done(w);
}

static size_t extents_size(const void *msg)
{
	return 8 + (size_t)((const struct gw_msg_extents *)msg)->count * 16;
}

static int extents_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_extents *m = msg;

	m->block = gw_get_le32(r);
	m->count = gw_get_le32(r);
	m->ext = NULL;
	if (r->underrun)
		return 0;
	if (m->block >= GW_MAX_RAM_BLOCKS || m->count < 1 || m->count > GW_WIRE_MAX_EXTENTS)
		return WHY("EXTENTS: block %u, %u ranges", m->block, m->count);
	m->raw = gw_get_bytes(r, (size_t)m->count * 16);
	for (uint32_t i = 0; m->raw && i < m->count; i++) {
		struct gw_extent e = gw_msg_extents_get(m, i);

		if (e.nr_pages == 0 || e.first_page + e.nr_pages < e.first_page)
			return WHY("EXTENTS: range %u empty or wraps", i);
	}
	return 0;
}

struct gw_extent gw_msg_extents_get(const struct gw_msg_extents *m, uint32_t i)
{
	return (struct gw_extent){ gw_le64_get(m->raw + (size_t)i * 16),
				   gw_le64_get(m->raw + (size_t)i * 16 + 8) };
}

/* ---- STATE ---- */

static int state_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_state *st = ((const struct gw_msg_state *)msg)->st;

	gw_put_le32(w, st->nr_sections);
	for (unsigned i = 0; i < st->nr_sections; i++) {
		const struct gw_section *sec = &st->sections[i];
		char name[GW_SECTION_NAME_MAX] = { 0 };

		memcpy(name, sec->name, strnlen(sec->name, sizeof(name) - 1));
		gw_put_bytes(w, name, sizeof(name));
		gw_put_le32(w, sec->version);
		gw_put_le32(w, (uint32_t)sec->len_bytes);
		gw_put_bytes(w, sec->data, sec->len_bytes);
	}
	return gw_wbuf_done(w);
}

static size_t state_size(const void *msg)
{
	const struct gw_state *st = ((const struct gw_msg_state *)msg)->st;
	size_t n = 4;

	for (unsigned i = 0; i < st->nr_sections; i++)
		n += GW_SECTION_NAME_MAX + 8 + st->sections[i].len_bytes;
	return n;
}

static int state_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_state *st = ((struct gw_msg_state *)msg)->st;
	uint32_t count = gw_get_le32(r);

	if (!st)
		return WHY("STATE not expected here");
	if (r->underrun || count > GW_STATE_MAX_SECTIONS)
		return WHY("STATE: %u sections", count);
	for (uint32_t i = 0; i < count; i++) {
		const char *name = gw_get_bytes(r, GW_SECTION_NAME_MAX);
		uint32_t version = gw_get_le32(r), n = gw_get_le32(r);
		const void *data = gw_get_bytes(r, n);
		int ret;

		if (!name || !data || !memchr(name, 0, GW_SECTION_NAME_MAX))
			return WHY("STATE: section %u truncated or unnamed", i);
		ret = gw_state_add(st, name, version, data, n);
		if (ret == -ENOMEM)
			return ret;
		if (ret)
			return WHY("STATE: section %s refused (%s)", name, strerror(-ret));
	}
	return 0;
}

/* ---- ERROR ---- */

static int error_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_error *m = msg;
	size_t n = strnlen(m->reason, GW_WIRE_MAX_REASON);

	gw_put_le32(w, m->code);
	gw_put_le16(w, (uint16_t)n);
	gw_put_bytes(w, m->reason, n);
	return gw_wbuf_done(w);
}

static size_t error_size(const void *msg)
{
	return 6 + strnlen(((const struct gw_msg_error *)msg)->reason, GW_WIRE_MAX_REASON);
}

static int error_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_error *m = msg;
	const char *s;
	uint16_t n;

	m->code = gw_get_le32(r);
	n = gw_get_le16(r);
	m->reason[0] = 0;
	if (r->underrun)
		return 0;
	if (n > GW_WIRE_MAX_REASON)
		return WHY("ERROR reason of %u bytes", n);
	s = gw_get_bytes(r, n);
	if (!s)
		return 0;
	/* Printable ASCII only; '"' would break the key="value" log format. */
	for (uint16_t i = 0; i < n; i++)
		m->reason[i] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"') ? s[i] : '?';
	m->reason[n] = 0;
	return 0;
}

/* ---- FDS ---- */

static int fds_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_fds *m = msg;

	if (m->count > GW_MAX_RAM_BLOCKS)
		return -EINVAL;
	gw_put_le32(w, m->count);
	for (uint32_t i = 0; i < m->count; i++)
		gw_put_le32(w, m->block[i]);
	return gw_wbuf_done(w);
}

static size_t fds_size(const void *msg)
{
	return 4 + (size_t)((const struct gw_msg_fds *)msg)->count * 4;
}

static int fds_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_fds *m = msg;

	m->count = gw_get_le32(r);
	if (r->underrun)
		return 0;
	if (m->count > GW_MAX_RAM_BLOCKS)
		return WHY("FDS: %u descriptors", m->count);
	for (uint32_t i = 0; i < m->count; i++) {
		m->block[i] = gw_get_le32(r);
		if (!r->underrun && m->block[i] != i)
			return WHY("FDS: descriptor %u for block %u (must be in block order)", i, m->block[i]);
	}
	return 0;
}

/* ---- PAGES_VOID ---- */

static size_t pages_void_size(const void *msg)
{
	const struct gw_msg_pages_void *m = msg;

	return 16 + (size_t)m->count * 8;
}

static int pages_void_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_pages_void *m = msg;

	if (m->count < 1 || m->count > GW_WIRE_MAX_VOID_PAGES)
		return -EINVAL;
	gw_put_le32(w, m->block);
	gw_put_le32(w, m->seq);
	gw_put_le32(w, m->count);
	gw_put_le32(w, 0);
	for (uint32_t i = 0; i < m->count; i++)
		gw_put_le64(w, m->pages[i]);
	return gw_wbuf_done(w);
}

static int pages_void_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_pages_void *m = msg;
	uint32_t reserved;

	m->block = gw_get_le32(r);
	m->seq = gw_get_le32(r);
	m->count = gw_get_le32(r);
	reserved = gw_get_le32(r);
	if (r->underrun)
		return 0;
	if (reserved)
		return WHY("PAGES_VOID reserved field not zero");
	if (m->count < 1 || m->count > GW_WIRE_MAX_VOID_PAGES)
		return WHY("PAGES_VOID count %u out of range", m->count);
	for (uint32_t i = 0; i < m->count; i++)
		m->pages[i] = gw_get_le64(r);
	return 0;
}

/* ---- the table ---- */

struct msg_desc {
	int (*encode)(struct gw_wbuf *w, const void *m);
	int (*decode)(struct gw_rbuf *r, void *m, char *why, size_t why_len);
	size_t (*size)(const void *m);	/* NULL: always max_bytes */
	uint32_t max_bytes;		/* the frame's length bound for this type */
};

#define STATE_MAX_BYTES (4 + GW_STATE_MAX_SECTIONS * (GW_SECTION_NAME_MAX + 8) + GW_STATE_MAX_BYTES)
#define PAGES_MAX_BYTES (GW_PAGES_HDR_BYTES + \
			 GW_WIRE_MAX_BATCH_PAGES * (GW_PAGES_ENTRY_BYTES + 4 + 2 + GW_WIRE_PAGE_BYTES))

/* Every payload size of the protocol is here. PAGES: a bound only (streamed). */
static const struct msg_desc msg_descs[GW_MSG__MAX + 1] = {
	[GW_MSG_HELLO]      = { hello_encode, hello_decode, hello_size,
				GW_MSG_HELLO_FIXED_BYTES + GW_MAX_RAM_BLOCKS * GW_MSG_HELLO_BLOCK_BYTES },
	[GW_MSG_HELLO_ACK]  = { hello_ack_encode, hello_ack_decode, NULL, 8 + GW_WIRE_ID_BYTES },
	[GW_MSG_CHAN_HELLO] = { chan_hello_encode, chan_hello_decode, NULL, GW_WIRE_ID_BYTES + 4 },
	[GW_MSG_CHAN_ACK]   = { chan_ack_encode, chan_ack_decode, NULL, 4 },
	[GW_MSG_EXTENTS]    = { extents_encode, extents_decode, extents_size,
				8 + GW_WIRE_MAX_EXTENTS * 16 },
	[GW_MSG_ROUND]      = { round_encode, round_decode, NULL, 16 },
	[GW_MSG_PAGES]      = { NULL, NULL, NULL, PAGES_MAX_BYTES },
	[GW_MSG_CHAN_END]   = { chan_end_encode, chan_end_decode, NULL, 24 },
	[GW_MSG_STATE]      = { state_encode, state_decode, state_size, STATE_MAX_BYTES },
	[GW_MSG_COMPLETE]   = { complete_encode, complete_decode, NULL, 16 },
	[GW_MSG_READY]      = { ready_encode, ready_decode, NULL, 8 },
	[GW_MSG_GO]         = { go_encode, go_decode, NULL, 0 },
	[GW_MSG_RESUMED]    = { resumed_encode, resumed_decode, NULL, 16 },
	[GW_MSG_ERROR]      = { error_encode, error_decode, error_size, 6 + GW_WIRE_MAX_REASON },
	[GW_MSG_FDS]        = { fds_encode, fds_decode, fds_size, 4 + GW_MAX_RAM_BLOCKS * 4 },
	[GW_MSG_VERIFY]     = { verify_encode, verify_decode, NULL, 24 },
	[GW_MSG_VERIFIED]   = { verified_encode, verified_decode, NULL, 40 },
	[GW_MSG_PING]       = { ping_encode, ping_decode, NULL, 8 },
	[GW_MSG_PONG]       = { ping_encode, ping_decode, NULL, 8 },
	/* Postcopy: wire/msg_postcopy.c. */
	[GW_MSG_PC_PREPARE] = { go_encode, go_decode, NULL, 0 },
	[GW_MSG_PC_PREPARED] = { gw_pc_prepared_encode, gw_pc_prepared_decode, NULL, 8 },
	[GW_MSG_PC_DIRTY]   = { gw_pc_map_encode, gw_pc_map_decode, gw_pc_map_size, GW_MSG_PC_MAP_MAX_BYTES },
	[GW_MSG_PC_REQ]     = { gw_pc_req_encode, gw_pc_req_decode, gw_pc_req_size, GW_MSG_PC_REQ_MAX_BYTES },
	[GW_MSG_PC_STATS]   = { gw_pc_stats_encode, gw_pc_stats_decode, gw_pc_stats_size, GW_MSG_PC_STATS_MAX_BYTES },
	[GW_MSG_PC_DONE]    = { gw_pc_stats_encode, gw_pc_stats_decode, gw_pc_stats_size, GW_MSG_PC_STATS_MAX_BYTES },
	[GW_MSG_PC_END]     = { go_encode, go_decode, NULL, 0 },
	[GW_MSG_PC_RECOVER] = { gw_pc_recover_encode, gw_pc_recover_decode, NULL, GW_WIRE_ID_BYTES + 8 },
	[GW_MSG_PC_NEEDED]  = { gw_pc_map_encode, gw_pc_map_decode, gw_pc_map_size, GW_MSG_PC_MAP_MAX_BYTES },
	[GW_MSG_PC_RECOVERED] = { gw_pc_recovered_encode, gw_pc_recovered_decode, NULL, 16 },
	[GW_MSG_PAGES_VOID] = { pages_void_encode, pages_void_decode, pages_void_size,
				16 + GW_WIRE_MAX_VOID_PAGES * 8 },
};

uint32_t gw_msg_max_payload(uint16_t type)
{
	return type >= 1 && type <= GW_MSG__MAX ? msg_descs[type].max_bytes : 0;
}

static const struct msg_desc *desc_of(uint16_t type)
{
	return type >= 1 && type <= GW_MSG__MAX && msg_descs[type].encode ? &msg_descs[type] : NULL;
}

int gw_msg_encode(uint16_t type, const void *m, struct gw_wbuf *w)
{
	const struct msg_desc *d = desc_of(type);

	return d ? d->encode(w, m) : -EINVAL;
}

size_t gw_msg_size(uint16_t type, const void *m)
{
	const struct msg_desc *d = desc_of(type);

	return !d ? 0 : d->size ? d->size(m) : d->max_bytes;
}

int gw_msg_decode(uint16_t type, const void *buf, size_t len, void *m, char *why, size_t why_len)
{
	const struct msg_desc *d = desc_of(type);
	struct gw_rbuf r;
	int ret;

	if (why && why_len)
		why[0] = 0;
	if (!d)
		return WHY("%s is not a message of its own", gw_frame_type_name(type));
	gw_rbuf_init(&r, buf, len);
	ret = d->decode(&r, m, why, why_len);
	if (ret)
		return ret;
	if (r.underrun)
		return WHY("%s truncated (%zu bytes)", gw_frame_type_name(type), len);
	if (gw_rbuf_done(&r))
		return WHY("%s has %zu trailing bytes", gw_frame_type_name(type), gw_rbuf_left(&r));
	return 0;
}

/* ---- PAGES sub-header ---- */

void gw_msg_pages_hdr_encode(uint8_t out[GW_PAGES_HDR_BYTES], const struct gw_msg_pages_hdr *m)
{
	gw_le32_put(out, m->block);
	gw_le32_put(out + 4, m->nr_entries);
	gw_le32_put(out + 8, m->round);
	gw_le32_put(out + 12, m->codec | m->flags);
	gw_le32_put(out + 16, m->data_bytes);
	gw_le32_put(out + 20, m->raw_bytes);
}

int gw_msg_pages_hdr_decode(const uint8_t in[GW_PAGES_HDR_BYTES], uint32_t frame_len,
			    struct gw_msg_pages_hdr *m)
{
	uint64_t want;

	m->block = gw_le32_get(in);
	m->nr_entries = gw_le32_get(in + 4);
	m->round = gw_le32_get(in + 8);
	m->codec = gw_le32_get(in + 12) & 0xffffu;
	m->flags = gw_le32_get(in + 12) & ~0xffffu;
	m->data_bytes = gw_le32_get(in + 16);
	m->raw_bytes = gw_le32_get(in + 20);
	if (m->nr_entries < 1 || m->nr_entries > GW_WIRE_MAX_BATCH_PAGES)
		return -EPROTO;
	if (m->codec >= GW_WIRE_CODEC_AUTO || (m->flags & ~GW_PAGES_FLAGS_ALL))
		return -EPROTO;
	if (m->raw_bytes > (uint64_t)m->nr_entries * (GW_WIRE_PAGE_BYTES + 2))
		return -EPROTO;
	if (m->codec == GW_WIRE_CODEC_NONE && m->data_bytes != m->raw_bytes)
		return -EPROTO;
	want = GW_PAGES_HDR_BYTES + (uint64_t)m->nr_entries * GW_PAGES_ENTRY_BYTES +
	       gw_pages_crc_bytes(m) + m->data_bytes;
	return want == frame_len ? 0 : -EPROTO;
}

/* ---- wire numbers <-> API ---- */

uint32_t gw_wire_err_from_errno(int neg_errno)
{
	switch (neg_errno) {
	case -EPROTO: case -EINVAL: return GW_WERR_PROTO;
	case -EBADMSG: return GW_WERR_CHECKSUM;
	case -ETIMEDOUT: return GW_WERR_TIMEOUT;
	case -ECANCELED: return GW_WERR_CANCELLED;
	case -EPROTONOSUPPORT: case -EOPNOTSUPP: return GW_WERR_VERSION;
	case -ERANGE: return GW_WERR_LAYOUT;
	case -ENOEXEC: return GW_WERR_STATE;
	case -ENOMEM: return GW_WERR_NOMEM;
	case -EILSEQ: return GW_WERR_VERIFY;
	case -EBUSY: return GW_WERR_BUSY;
	case -EACCES: return GW_WERR_DENIED;
	case -EUCLEAN: return GW_WERR_COMPRESS;
	default: return GW_WERR_INTERNAL;
	}
}

int gw_wire_err_to_errno(uint32_t code)
{
	static const int map[] = {
		[GW_WERR_PROTO] = EPROTO, [GW_WERR_CHECKSUM] = EBADMSG,
		[GW_WERR_TIMEOUT] = ETIMEDOUT, [GW_WERR_CANCELLED] = ECANCELED,
		[GW_WERR_VERSION] = EPROTONOSUPPORT, [GW_WERR_LAYOUT] = ERANGE,
		[GW_WERR_STATE] = ENOEXEC, [GW_WERR_NOMEM] = ENOMEM,
		[GW_WERR_VERIFY] = EILSEQ, [GW_WERR_INTERNAL] = EIO,
		[GW_WERR_BUSY] = EBUSY, [GW_WERR_DENIED] = EACCES,
		[GW_WERR_COMPRESS] = EUCLEAN,
	};

	if (code == 0 || code >= sizeof(map) / sizeof(map[0]))
		return -EPROTO;
	return -map[code];
}

/* The one map between the API's codec ids and the wire's codec numbers. */
static const struct {
	enum gw_codec_id id;
	uint32_t wire;
} codec_map[] = {
	{ GW_CODEC_NONE, GW_WIRE_CODEC_NONE },
	{ GW_CODEC_ZSTD, GW_WIRE_CODEC_ZSTD },
	{ GW_CODEC_LZ4, GW_WIRE_CODEC_LZ4 },
	{ GW_CODEC_ZLIB, GW_WIRE_CODEC_ZLIB },
	{ GW_CODEC_ISAL, GW_WIRE_CODEC_ISAL },
	{ GW_CODEC_AUTO, GW_WIRE_CODEC_AUTO },
};

uint32_t gw_wire_codec_from_id(enum gw_codec_id id)
{
	for (size_t i = 0; i < sizeof(codec_map) / sizeof(codec_map[0]); i++)
		if (codec_map[i].id == id)
			return codec_map[i].wire;
	return GW_WIRE_CODEC_NONE;
}

int gw_wire_codec_to_id(uint32_t wire, enum gw_codec_id *id)
{
	for (size_t i = 0; i < sizeof(codec_map) / sizeof(codec_map[0]); i++)
		if (codec_map[i].wire == wire) {
			*id = codec_map[i].id;
			return 0;
		}
	return -EPROTO;
}
