/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol v1: header, bounded buffers and message codecs. See wire.h
 * and docs/protocol.md. Everything read here is hostile: each decoder checks
 * every field before the caller may use it.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "state.h"
#include "wire/wire.h"

static const struct {
	const char *name;
	uint32_t max_payload;
} wire_types[GW_MSG__MAX + 1] = {
	[GW_MSG_HELLO]      = { "HELLO", 64 + GW_MAX_RAM_BLOCKS * 56 },
	[GW_MSG_HELLO_ACK]  = { "HELLO_ACK", 8 },
	[GW_MSG_CHAN_HELLO] = { "CHAN_HELLO", GW_WIRE_ID_BYTES + 4 },
	[GW_MSG_CHAN_ACK]   = { "CHAN_ACK", 4 },
	[GW_MSG_EXTENTS]    = { "EXTENTS", 8 + GW_WIRE_MAX_EXTENTS * 16 },
	[GW_MSG_ROUND]      = { "ROUND", 16 },
	[GW_MSG_PAGES]      = { "PAGES", GW_PAGES_HDR_BYTES +
				GW_WIRE_MAX_BATCH_PAGES * (GW_PAGES_ENTRY_BYTES + 2 + GW_WIRE_MAX_PAGE_BYTES) },
	[GW_MSG_CHAN_END]   = { "CHAN_END", 24 },
	[GW_MSG_STATE]      = { "STATE", 4 + GW_STATE_MAX_SECTIONS * (GW_SECTION_NAME_MAX + 8) +
				GW_STATE_MAX_BYTES },
	[GW_MSG_COMPLETE]   = { "COMPLETE", 40 },
	[GW_MSG_READY]      = { "READY", 24 },
	[GW_MSG_GO]         = { "GO", 0 },
	[GW_MSG_RESUMED]    = { "RESUMED", 8 },
	[GW_MSG_ERROR]      = { "ERROR", 6 + GW_WIRE_MAX_REASON },
	[GW_MSG_FDS]        = { "FDS", 4 + GW_MAX_RAM_BLOCKS * 4 },
};

uint32_t gw_wire_max_payload(uint16_t type)
{
	return type >= 1 && type <= GW_MSG__MAX ? wire_types[type].max_payload : 0;
}

const char *gw_wire_type_name(uint16_t type)
{
	return type >= 1 && type <= GW_MSG__MAX ? wire_types[type].name : "UNKNOWN";
}

static void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }

void gw_wire_hdr_encode(uint8_t out[GW_WIRE_HDR_BYTES], uint16_t type, uint32_t flags,
			uint32_t len, uint32_t seq)
{
	uint16_t v16;

	put32(out, GW_WIRE_MAGIC);
	v16 = htole16(GW_WIRE_VERSION);
	memcpy(out + 4, &v16, 2);
	v16 = htole16(type);
	memcpy(out + 6, &v16, 2);
	put32(out + 8, flags);
	put32(out + 12, len);
	put32(out + 16, seq);
	put32(out + 20, 0);
}

void gw_wire_hdr_set_crc(uint8_t hdr[GW_WIRE_HDR_BYTES], uint32_t crc)
{
	put32(hdr + 20, crc);
}

int gw_wire_hdr_decode(const uint8_t in[GW_WIRE_HDR_BYTES], struct gw_frame_hdr *h)
{
	if (get32(in) != GW_WIRE_MAGIC)
		return -EPROTO;
	h->version = get16(in + 4);
	h->type = get16(in + 6);
	h->flags = get32(in + 8);
	h->len = get32(in + 12);
	h->seq = get32(in + 16);
	h->crc = get32(in + 20);
	if (h->version != GW_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	if (h->type == 0 || h->type > GW_MSG__MAX)
		return -EPROTO;
	if (h->len > gw_wire_max_payload(h->type))
		return -EPROTO;
	if (h->flags)
		return -EPROTO;	/* v1 defines no header flags */
	return 0;
}

int gw_wire_err_from_errno(int neg_errno)
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

/* ---- bounded buffers ---- */
void gw_wbuf_init(struct gw_wbuf *w, void *buf, size_t cap)
{
	w->p = buf;
	w->len = 0;
	w->cap = cap;
	w->overflow = false;
}

void gw_put_bytes(struct gw_wbuf *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return;
	}
	if (n)
		memcpy(w->p + w->len, src, n);
	w->len += n;
}

void gw_put_u8(struct gw_wbuf *w, uint8_t v) { gw_put_bytes(w, &v, 1); }
void gw_put_le16(struct gw_wbuf *w, uint16_t v) { v = htole16(v); gw_put_bytes(w, &v, 2); }
void gw_put_le32(struct gw_wbuf *w, uint32_t v) { v = htole32(v); gw_put_bytes(w, &v, 4); }
void gw_put_le64(struct gw_wbuf *w, uint64_t v) { v = htole64(v); gw_put_bytes(w, &v, 8); }

void gw_rbuf_init(struct gw_rbuf *r, const void *buf, size_t len)
{
	r->p = buf;
	r->len = len;
	r->off = 0;
	r->underrun = false;
}

const void *gw_get_bytes(struct gw_rbuf *r, size_t n)
{
	const void *p;

	if (r->underrun || n > r->len - r->off) {
		r->underrun = true;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint8_t gw_get_u8(struct gw_rbuf *r)
{
	const uint8_t *p = gw_get_bytes(r, 1);
	return p ? *p : 0;
}

uint16_t gw_get_le16(struct gw_rbuf *r)
{
	const uint8_t *p = gw_get_bytes(r, 2);
	return p ? get16(p) : 0;
}

uint32_t gw_get_le32(struct gw_rbuf *r)
{
	const uint8_t *p = gw_get_bytes(r, 4);
	return p ? get32(p) : 0;
}

uint64_t gw_get_le64(struct gw_rbuf *r)
{
	const uint8_t *p = gw_get_bytes(r, 8);
	uint64_t v = 0;

	if (p)
		memcpy(&v, p, 8);
	return le64toh(v);
}

int gw_rbuf_done(const struct gw_rbuf *r)
{
	return r->underrun || r->off != r->len ? -EPROTO : 0;
}

/* ---- HELLO ---- */
int gw_msg_hello_encode(struct gw_wbuf *w, const struct gw_msg_hello *m)
{
	gw_put_le32(w, m->min_version);
	gw_put_le32(w, m->max_version);
	gw_put_bytes(w, m->id, GW_WIRE_ID_BYTES);
	gw_put_le32(w, m->page_size_bytes);
	gw_put_le32(w, m->nr_channels);
	gw_put_le32(w, m->codec);
	gw_put_le32(w, m->codec_level);
	gw_put_le32(w, m->flags);
	gw_put_le32(w, m->batch_pages);
	gw_put_le32(w, m->nr_blocks);
	for (uint32_t i = 0; i < m->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++) {
		char name[GW_RAM_NAME_MAX] = { 0 };

		strncpy(name, m->blocks[i].name, sizeof(name) - 1);
		gw_put_bytes(w, name, sizeof(name));
		gw_put_le64(w, m->blocks[i].gpa);
		gw_put_le64(w, m->blocks[i].size_bytes);
		gw_put_le32(w, m->blocks[i].page_size_bytes);
		gw_put_le32(w, 0);
	}
	return w->overflow ? -ENOSPC : 0;
}

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), -EPROTO)

int gw_msg_hello_decode(const void *buf, size_t len, struct gw_msg_hello *m,
			char *why, size_t why_len)
{
	struct gw_rbuf r;
	const void *id;

	memset(m, 0, sizeof(*m));
	gw_rbuf_init(&r, buf, len);
	m->min_version = gw_get_le32(&r);
	m->max_version = gw_get_le32(&r);
	id = gw_get_bytes(&r, GW_WIRE_ID_BYTES);
	if (id)
		memcpy(m->id, id, GW_WIRE_ID_BYTES);
	m->page_size_bytes = gw_get_le32(&r);
	m->nr_channels = gw_get_le32(&r);
	m->codec = gw_get_le32(&r);
	m->codec_level = gw_get_le32(&r);
	m->flags = gw_get_le32(&r);
	m->batch_pages = gw_get_le32(&r);
	m->nr_blocks = gw_get_le32(&r);
	if (r.underrun)
		return WHY("HELLO truncated");
	if (m->min_version > m->max_version || m->min_version == 0)
		return WHY("HELLO versions %u..%u invalid", m->min_version, m->max_version);
	if (m->page_size_bytes != 4096)
		return WHY("page size %u not supported", m->page_size_bytes);
	if (m->nr_channels > GW_MAX_CHANNELS ||
	    (m->nr_channels == 0) != ((m->flags & GW_HELLO_LOCAL) != 0))
		return WHY("channels %u invalid (1..%u; 0 exactly for local migration)",
			   m->nr_channels, GW_MAX_CHANNELS);
	if (m->codec > 5)
		return WHY("codec %u unknown", m->codec);
	if (m->flags & ~GW_HELLO_FLAGS_ALL)
		return WHY("unknown HELLO flags 0x%x", m->flags & ~GW_HELLO_FLAGS_ALL);
	if (m->batch_pages < 1 || m->batch_pages > GW_WIRE_MAX_BATCH_PAGES)
		return WHY("batch of %u pages out of 1..%u", m->batch_pages, GW_WIRE_MAX_BATCH_PAGES);
	if (m->nr_blocks < 1 || m->nr_blocks > GW_MAX_RAM_BLOCKS)
		return WHY("%u RAM blocks out of 1..%u", m->nr_blocks, GW_MAX_RAM_BLOCKS);
	for (uint32_t i = 0; i < m->nr_blocks; i++) {
		const char *name = gw_get_bytes(&r, GW_RAM_NAME_MAX);
		uint64_t pages;

		m->blocks[i].gpa = gw_get_le64(&r);
		m->blocks[i].size_bytes = gw_get_le64(&r);
		m->blocks[i].page_size_bytes = gw_get_le32(&r);
		gw_get_le32(&r);
		if (r.underrun)
			return WHY("HELLO truncated in block %u", i);
		if (!memchr(name, 0, GW_RAM_NAME_MAX) || !name[0])
			return WHY("block %u name not terminated or empty", i);
		memcpy(m->blocks[i].name, name, GW_RAM_NAME_MAX);
		if (m->blocks[i].page_size_bytes != m->page_size_bytes)
			return WHY("block %s page size %u", name, m->blocks[i].page_size_bytes);
		pages = m->blocks[i].size_bytes / m->page_size_bytes;
		if (m->blocks[i].size_bytes == 0 || m->blocks[i].size_bytes % m->page_size_bytes ||
		    pages > (1ull << 40))
			return WHY("block %s size %llu invalid", name,
				   (unsigned long long)m->blocks[i].size_bytes);
		if (m->blocks[i].gpa % m->page_size_bytes ||
		    m->blocks[i].gpa + m->blocks[i].size_bytes < m->blocks[i].gpa)
			return WHY("block %s gpa 0x%llx invalid", name,
				   (unsigned long long)m->blocks[i].gpa);
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(m->blocks[j].name, name))
				return WHY("block name %s repeated", name);
	}
	if (gw_rbuf_done(&r))
		return WHY("HELLO has %zu trailing bytes", r.len - r.off);
	return 0;
}

/* ---- PAGES ---- */
void gw_msg_pages_hdr_encode(uint8_t out[GW_PAGES_HDR_BYTES], const struct gw_msg_pages_hdr *m)
{
	put32(out, m->block);
	put32(out + 4, m->nr_entries);
	put32(out + 8, m->round);
	put32(out + 12, m->codec);
	put32(out + 16, m->data_bytes);
	put32(out + 20, m->raw_bytes);
}

int gw_msg_pages_hdr_decode(const uint8_t in[GW_PAGES_HDR_BYTES], uint32_t frame_len,
			    struct gw_msg_pages_hdr *m)
{
	uint64_t want;

	m->block = get32(in);
	m->nr_entries = get32(in + 4);
	m->round = get32(in + 8);
	m->codec = get32(in + 12);
	m->data_bytes = get32(in + 16);
	m->raw_bytes = get32(in + 20);
	if (m->nr_entries < 1 || m->nr_entries > GW_WIRE_MAX_BATCH_PAGES)
		return -EPROTO;
	if (m->codec > 4)
		return -EPROTO;
	if (m->raw_bytes > (uint64_t)m->nr_entries * (GW_WIRE_MAX_PAGE_BYTES + 2))
		return -EPROTO;
	if (m->codec == 0 && m->data_bytes != m->raw_bytes)
		return -EPROTO;
	want = GW_PAGES_HDR_BYTES + (uint64_t)m->nr_entries * GW_PAGES_ENTRY_BYTES + m->data_bytes;
	if (want != frame_len)
		return -EPROTO;
	return 0;
}

/* ---- ERROR ---- */
int gw_msg_error_encode(struct gw_wbuf *w, uint32_t code, const char *reason)
{
	size_t n = reason ? strnlen(reason, GW_WIRE_MAX_REASON) : 0;

	gw_put_le32(w, code);
	gw_put_le16(w, (uint16_t)n);
	gw_put_bytes(w, reason, n);
	return w->overflow ? -ENOSPC : 0;
}

int gw_msg_error_decode(const void *buf, size_t len, struct gw_msg_error *m)
{
	struct gw_rbuf r;
	const char *s;
	uint16_t n;

	gw_rbuf_init(&r, buf, len);
	m->code = gw_get_le32(&r);
	n = gw_get_le16(&r);
	if (r.underrun || n > GW_WIRE_MAX_REASON)
		return -EPROTO;
	s = gw_get_bytes(&r, n);
	if (!s || gw_rbuf_done(&r))
		return -EPROTO;
	for (uint16_t i = 0; i < n; i++)
		m->reason[i] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"') ? s[i] : '?';
	m->reason[n] = 0;
	return 0;
}

/* ---- STATE ---- */
size_t gw_msg_state_size(const struct gw_state *st)
{
	size_t n = 4;

	for (unsigned i = 0; i < st->nr_sections; i++)
		n += GW_SECTION_NAME_MAX + 8 + st->sections[i].len_bytes;
	return n;
}

int gw_msg_state_encode(struct gw_wbuf *w, const struct gw_state *st)
{
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
	return w->overflow ? -ENOSPC : 0;
}

int gw_msg_state_decode(const void *buf, size_t len, struct gw_state *st)
{
	struct gw_rbuf r;
	uint32_t count;

	gw_rbuf_init(&r, buf, len);
	count = gw_get_le32(&r);
	if (r.underrun || count > GW_STATE_MAX_SECTIONS)
		return -EPROTO;
	for (uint32_t i = 0; i < count; i++) {
		const char *name = gw_get_bytes(&r, GW_SECTION_NAME_MAX);
		uint32_t version = gw_get_le32(&r);
		uint32_t n = gw_get_le32(&r);
		const void *data = gw_get_bytes(&r, n);
		int ret;

		if (!name || !data || !memchr(name, 0, GW_SECTION_NAME_MAX))
			return -EPROTO;
		ret = gw_state_add(st, name, version, data, n);
		if (ret)
			return ret == -ENOMEM ? -ENOMEM : -EPROTO;
	}
	return gw_rbuf_done(&r);
}
