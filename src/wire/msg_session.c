/* SPDX-License-Identifier: MIT */
/*
 * Message codecs: HELLO and the small fixed messages of the session and
 * its channels (wire/msg_codecs.h). Everything decoded here is hostile:
 * each decoder checks every field, reserved fields must be zero.
 */
#include <godwit/log.h>
#include "wire/msg_codecs.h"

/* ---- HELLO ---- */

int gw_msg_hello_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_hello *m = msg;

	if (m->nr_blocks > GW_MAX_RAM_BLOCKS || m->profile_bytes > GW_WIRE_MAX_PROFILE_BYTES)
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
	if (m->flags & GW_HELLO_VM) {
		gw_put_le32(w, m->nr_vcpus);
		gw_put_le32(w, m->profile_bytes);
		gw_put_bytes(w, m->profile, m->profile_bytes);
	}
	return gw_wbuf_done(w);
}

size_t gw_msg_hello_size(const void *msg)
{
	const struct gw_msg_hello *m = msg;

	return GW_MSG_HELLO_FIXED_BYTES + (size_t)m->nr_blocks * GW_MSG_HELLO_BLOCK_BYTES +
	       (m->flags & GW_HELLO_VM ? GW_MSG_HELLO_VM_BYTES + m->profile_bytes : 0);
}

/* The VM part (GW_HELLO_VM); the profile's bytes are the VMMs' to check. */
static int hello_decode_vm(struct gw_rbuf *r, struct gw_msg_hello *m, char *why, size_t why_len)
{
	m->nr_vcpus = gw_get_le32(r);
	m->profile_bytes = gw_get_le32(r);
	if (r->underrun)
		return WHY("HELLO truncated in its VM part");
	if (m->nr_vcpus < 1 || m->nr_vcpus > GW_WIRE_MAX_HELLO_VCPUS)
		return WHY("HELLO announces %u vCPUs (1..%u)", m->nr_vcpus, GW_WIRE_MAX_HELLO_VCPUS);
	if (m->profile_bytes > GW_WIRE_MAX_PROFILE_BYTES || gw_rbuf_left(r) < m->profile_bytes)
		return WHY("HELLO CPU profile of %u bytes (at most %u, %zu left)", m->profile_bytes,
			   GW_WIRE_MAX_PROFILE_BYTES, gw_rbuf_left(r));
	gw_get_copy(r, m->profile, m->profile_bytes);
	return 0;
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
	const char *raw = gw_get_bytes(r, GW_RAM_NAME_MAX);
	uint64_t gpa = gw_get_le64(r), size = gw_get_le64(r);
	uint32_t page_size = gw_get_le32(r), reserved = gw_get_le32(r);
	char name[GW_LOG_STR_MAX(GW_RAM_NAME_MAX)];	/* for reasons: the peer's bytes, escaped */

	if (r->underrun)
		return WHY("HELLO truncated in block %u", i);
	if (!memchr(raw, 0, GW_RAM_NAME_MAX) || !raw[0])
		return WHY("block %u name not terminated or empty", i);
	gw_log_str(name, sizeof(name), raw);
	if (reserved)
		return WHY("block %s: reserved field not zero", name);
	if (page_size != m->page_size_bytes)
		return WHY("block %s page size %u", name, page_size);
	if (size == 0 || size % page_size || size / page_size > (1ull << 40))
		return WHY("block %s size %llu invalid", name, (unsigned long long)size);
	if (gpa % page_size || gpa + size < gpa)
		return WHY("block %s gpa 0x%llx invalid", name, (unsigned long long)gpa);
	for (uint32_t j = 0; j < i; j++)
		if (!strcmp(m->blocks[j].name, raw))
			return WHY("block name %s repeated", name);
	memcpy(m->blocks[i].name, raw, GW_RAM_NAME_MAX);
	m->blocks[i].gpa = gpa;
	m->blocks[i].size_bytes = size;
	m->blocks[i].page_size_bytes = page_size;
	return 0;
}

/* GW_WIRE_ID_BYTES from @r into @out, if they are there (an underrun is the caller's check). */
static void get_id(struct gw_rbuf *r, uint8_t out[GW_WIRE_ID_BYTES])
{
	const void *p = gw_get_bytes(r, GW_WIRE_ID_BYTES);

	if (p)
		memcpy(out, p, GW_WIRE_ID_BYTES);
}

int gw_msg_hello_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_hello *m = msg;
	int ret;

	memset(m, 0, sizeof(*m));
	m->min_version = gw_get_le32(r);
	m->max_version = gw_get_le32(r);
	get_id(r, m->id);
	get_id(r, m->boot_id);
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
	if (!ret && (m->flags & GW_HELLO_VM))
		ret = hello_decode_vm(r, m, why, why_len);
	if (!ret && gw_rbuf_done(r))
		return WHY("HELLO has %zu trailing bytes", gw_rbuf_left(r));
	return ret;
}

/* ---- small fixed messages ---- */

int gw_msg_hello_ack_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_hello_ack *m = msg;

	gw_put_le32(w, m->version);
	gw_put_le32(w, m->flags);
	gw_put_bytes(w, m->boot_id, GW_WIRE_ID_BYTES);
	gw_put_bytes(w, m->challenge, GW_WIRE_ID_BYTES);
	return gw_wbuf_done(w);
}

int gw_msg_hello_ack_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_hello_ack *m = msg;

	m->version = gw_get_le32(r);
	m->flags = gw_get_le32(r);
	get_id(r, m->boot_id);
	get_id(r, m->challenge);
	if (!r->underrun && (m->flags & ~GW_HELLO_FLAGS_ALL))
		return WHY("unknown HELLO_ACK flags 0x%x", m->flags);
	return 0;
}

int gw_msg_chan_hello_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_chan_hello *m = msg;

	gw_put_bytes(w, m->id, GW_WIRE_ID_BYTES);
	gw_put_le32(w, m->index);
	gw_put_bytes(w, m->challenge, GW_WIRE_ID_BYTES);
	return gw_wbuf_done(w);
}

int gw_msg_chan_hello_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_chan_hello *m = msg;

	get_id(r, m->id);
	m->index = gw_get_le32(r);
	get_id(r, m->challenge);
	if (!r->underrun && m->index >= GW_WIRE_MAX_CHANNELS)
		return WHY("channel index %u out of range", m->index);
	return 0;
}

int gw_msg_chan_ack_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le32(w, ((const struct gw_msg_chan_ack *)msg)->index);
	return gw_wbuf_done(w);
}

int gw_msg_chan_ack_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_chan_ack *)msg)->index = gw_get_le32(r);
	(void)why, (void)why_len;
	return 0;
}

int gw_msg_round_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_round *m = msg;

	gw_put_le32(w, m->round);
	gw_put_le32(w, 0);
	gw_put_le64(w, m->dirty_pages);
	return gw_wbuf_done(w);
}

int gw_msg_round_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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

int gw_msg_chan_end_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_chan_end *m = msg;

	gw_put_le32(w, m->index);
	gw_put_le32(w, 0);
	gw_put_le64(w, m->frames);
	gw_put_le64(w, m->pages);
	return gw_wbuf_done(w);
}

int gw_msg_chan_end_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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

int gw_msg_complete_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_complete *m = msg;

	gw_put_le32(w, m->nr_channels);
	gw_put_le32(w, m->flags);
	gw_put_le64(w, m->total_pages);
	return gw_wbuf_done(w);
}

int gw_msg_complete_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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

int gw_msg_ready_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le64(w, ((const struct gw_msg_ready *)msg)->load_ns);
	return gw_wbuf_done(w);
}

int gw_msg_ready_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_ready *)msg)->load_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

int gw_msg_resumed_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_resumed *m = msg;

	gw_put_le64(w, m->go_to_resume_ns);
	gw_put_le64(w, m->resume_mono_ns);
	return gw_wbuf_done(w);
}

int gw_msg_resumed_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_resumed *m = msg;

	m->go_to_resume_ns = gw_get_le64(r);
	m->resume_mono_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

int gw_msg_verify_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_verify *m = msg;

	gw_put_le64(w, m->digest_lo);
	gw_put_le64(w, m->digest_hi);
	gw_put_le64(w, m->verify_ns);
	return gw_wbuf_done(w);
}

int gw_msg_verify_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_verify *m = msg;

	m->digest_lo = gw_get_le64(r);
	m->digest_hi = gw_get_le64(r);
	m->verify_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

int gw_msg_verified_encode(struct gw_wbuf *w, const void *msg)
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

int gw_msg_verified_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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

int gw_msg_ping_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le64(w, ((const struct gw_msg_ping *)msg)->token);
	gw_put_le64(w, ((const struct gw_msg_ping *)msg)->backlog_bytes);
	return gw_wbuf_done(w);
}

int gw_msg_ping_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_ping *)msg)->token = gw_get_le64(r);
	((struct gw_msg_ping *)msg)->backlog_bytes = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

int gw_msg_go_encode(struct gw_wbuf *w, const void *msg)
{
	(void)msg;
	return gw_wbuf_done(w);
}

int gw_msg_go_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	(void)r, (void)msg, (void)why, (void)why_len;
	return 0;
}
