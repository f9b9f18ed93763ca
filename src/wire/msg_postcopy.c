/* SPDX-License-Identifier: MIT */
/*
 * Postcopy message codecs, in the pattern of wire/msg.c: every field of a
 * decoded message is checked here before anyone uses it (counts, alignment,
 * overflow, reserved fields zero); what depends on the RAM layout (block
 * index in range, pages inside the block) is checked by the receiver,
 * which knows the layout (dest/postcopy.c, source/postcopy.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "wire/msg_postcopy.h"

#define WHY(...) (why ? snprintf(why, why_len, __VA_ARGS__) : 0, -EPROTO)

/* ---- PC_PREPARED ---- */

int gw_pc_prepared_encode(struct gw_wbuf *w, const void *msg)
{
	gw_put_le64(w, ((const struct gw_msg_pc_prepared *)msg)->prepare_ns);
	return gw_wbuf_done(w);
}

int gw_pc_prepared_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	((struct gw_msg_pc_prepared *)msg)->prepare_ns = gw_get_le64(r);
	(void)why, (void)why_len;
	return 0;
}

/* ---- PC_DIRTY / PC_NEEDED: a piece of a page bitmap ---- */

int gw_pc_map_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_pc_map *m = msg;

	if (m->nr_words < 1 || m->nr_words > GW_WIRE_MAX_MAP_WORDS || m->first_page % 64)
		return -EINVAL;
	gw_put_le32(w, m->block);
	gw_put_le32(w, m->nr_words);
	gw_put_le64(w, m->first_page);
	for (uint32_t i = 0; i < m->nr_words; i++)
		gw_put_le64(w, gw_msg_pc_map_word(m, i));
	return gw_wbuf_done(w);
}

size_t gw_pc_map_size(const void *msg)
{
	return 16 + (size_t)((const struct gw_msg_pc_map *)msg)->nr_words * 8;
}

int gw_pc_map_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_pc_map *m = msg;

	m->block = gw_get_le32(r);
	m->nr_words = gw_get_le32(r);
	m->first_page = gw_get_le64(r);
	m->words = NULL;
	m->raw = NULL;
	if (r->underrun)
		return 0;
	if (m->block >= GW_WIRE_MAX_BLOCKS)
		return WHY("page map: block %u", m->block);
	if (m->nr_words < 1 || m->nr_words > GW_WIRE_MAX_MAP_WORDS)
		return WHY("page map: %u words", m->nr_words);
	if (m->first_page % 64 || m->first_page > (1ull << 40))
		return WHY("page map: first page %llu not a multiple of 64 or beyond 2^40",
			   (unsigned long long)m->first_page);
	m->raw = gw_get_bytes(r, (size_t)m->nr_words * 8);
	return 0;
}

int gw_msg_pc_map_iov(const struct gw_msg_pc_map *m, uint8_t hdr[16], struct iovec iov[2])
{
	if (!m->words || m->nr_words < 1 || m->nr_words > GW_WIRE_MAX_MAP_WORDS || m->first_page % 64)
		return -EINVAL;
	if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
		return -EOPNOTSUPP;
	gw_le32_put(hdr, m->block);
	gw_le32_put(hdr + 4, m->nr_words);
	gw_le64_put(hdr + 8, m->first_page);
	iov[0] = (struct iovec){ hdr, 16 };
	iov[1] = (struct iovec){ (void *)m->words, (size_t)m->nr_words * 8 };
	return 0;
}

uint64_t gw_msg_pc_map_word(const struct gw_msg_pc_map *m, uint32_t i)
{
	return m->words ? m->words[i] : gw_le64_get(m->raw + (size_t)i * 8);
}

/* ---- PC_REQ ---- */

int gw_pc_req_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_pc_req *m = msg;

	if (m->count < 1 || m->count > GW_WIRE_MAX_BATCH_PAGES)
		return -EINVAL;
	gw_put_le32(w, m->block);
	gw_put_le32(w, m->count);
	for (uint32_t i = 0; i < m->count; i++)
		gw_put_le64(w, gw_msg_pc_req_page(m, i));
	return gw_wbuf_done(w);
}

size_t gw_pc_req_size(const void *msg)
{
	return 8 + (size_t)((const struct gw_msg_pc_req *)msg)->count * 8;
}

int gw_pc_req_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_pc_req *m = msg;

	m->block = gw_get_le32(r);
	m->count = gw_get_le32(r);
	m->pages = NULL;
	m->raw = NULL;
	if (r->underrun)
		return 0;
	if (m->block >= GW_WIRE_MAX_BLOCKS || m->count < 1 || m->count > GW_WIRE_MAX_BATCH_PAGES)
		return WHY("PC_REQ: block %u, %u pages", m->block, m->count);
	m->raw = gw_get_bytes(r, (size_t)m->count * 8);
	for (uint32_t i = 0; m->raw && i < m->count; i++)
		if (gw_msg_pc_req_page(m, i) >= (1ull << 40))
			return WHY("PC_REQ: page %llu beyond 2^40",
				   (unsigned long long)gw_msg_pc_req_page(m, i));
	return 0;
}

uint64_t gw_msg_pc_req_page(const struct gw_msg_pc_req *m, uint32_t i)
{
	return m->pages ? m->pages[i] : gw_le64_get(m->raw + (size_t)i * 8);
}

/* ---- PC_STATS / PC_DONE ---- */

/* The fixed le64 fields, in wire order. */
static uint64_t *stats_field(struct gw_msg_pc_stats *m, unsigned i)
{
	uint64_t *f[14] = {
		&m->remaining_pages, &m->requests, &m->placed_requested, &m->placed_pushed,
		&m->dup_pages, &m->faults, &m->local_faults, &m->blocktime_ns,
		&m->vcpu_blocktime_total_ns, &m->latency_p50_ns, &m->latency_p99_ns,
		&m->latency_max_ns, &m->paused_ns, &m->latency_samples,
	};

	return f[i];
}

int gw_pc_stats_encode(struct gw_wbuf *w, const void *msg)
{
	struct gw_msg_pc_stats *m = (struct gw_msg_pc_stats *)msg;	/* read only */

	if (m->nr_vcpus > GW_WIRE_MAX_VCPUS)
		return -EINVAL;
	gw_put_le32(w, 0);
	gw_put_le32(w, m->nr_vcpus);
	for (unsigned i = 0; i < 14; i++)
		gw_put_le64(w, *stats_field(m, i));
	for (uint32_t i = 0; i < m->nr_vcpus; i++)
		gw_put_le64(w, m->vcpu_blocktime_ns[i]);
	return gw_wbuf_done(w);
}

size_t gw_pc_stats_size(const void *msg)
{
	return GW_MSG_PC_STATS_FIXED_BYTES + (size_t)((const struct gw_msg_pc_stats *)msg)->nr_vcpus * 8;
}

int gw_pc_stats_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_pc_stats *m = msg;
	uint32_t reserved = gw_get_le32(r);

	memset(m, 0, sizeof(*m));
	m->nr_vcpus = gw_get_le32(r);
	if (r->underrun)
		return 0;
	if (reserved || m->nr_vcpus > GW_WIRE_MAX_VCPUS)
		return WHY("postcopy statistics: reserved field not zero or %u vCPUs", m->nr_vcpus);
	for (unsigned i = 0; i < 14; i++)
		*stats_field(m, i) = gw_get_le64(r);
	for (uint32_t i = 0; i < m->nr_vcpus; i++)
		m->vcpu_blocktime_ns[i] = gw_get_le64(r);
	return 0;
}

/* ---- PC_RECOVER, PC_RECOVERED ---- */

int gw_pc_recover_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_pc_recover *m = msg;

	gw_put_bytes(w, m->id, GW_WIRE_ID_BYTES);
	gw_put_le32(w, m->recoveries);
	gw_put_le32(w, 0);
	return gw_wbuf_done(w);
}

int gw_pc_recover_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_pc_recover *m = msg;
	const void *id = gw_get_bytes(r, GW_WIRE_ID_BYTES);
	uint32_t reserved;

	if (id)
		memcpy(m->id, id, GW_WIRE_ID_BYTES);
	m->recoveries = gw_get_le32(r);
	reserved = gw_get_le32(r);
	if (!r->underrun && reserved)
		return WHY("PC_RECOVER reserved field not zero");
	return 0;
}

int gw_pc_recovered_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_pc_recovered *m = msg;

	gw_put_le32(w, m->flags);
	gw_put_le32(w, 0);
	gw_put_le64(w, m->needed_pages);
	return gw_wbuf_done(w);
}

int gw_pc_recovered_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
{
	struct gw_msg_pc_recovered *m = msg;
	uint32_t reserved;

	m->flags = gw_get_le32(r);
	reserved = gw_get_le32(r);
	m->needed_pages = gw_get_le64(r);
	if (!r->underrun && ((m->flags & ~GW_PC_RECOVERED_DONE) || reserved))
		return WHY("PC_RECOVERED: unknown flags 0x%x or reserved field not zero", m->flags);
	return 0;
}
