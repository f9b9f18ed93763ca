/* SPDX-License-Identifier: MIT */
/*
 * Message codecs: EXTENTS, STATE, ERROR, FDS, PAGES_VOID (variable-size
 * payloads; wire/msg_codecs.h). Everything decoded here is hostile: each
 * decoder checks every field and count before the caller may use it.
 */
#include <godwit/log.h>
#include "wire/msg_codecs.h"

/* ---- EXTENTS ---- */

int gw_msg_extents_encode(struct gw_wbuf *w, const void *msg)
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

size_t gw_msg_extents_size(const void *msg)
{
	return 8 + (size_t)((const struct gw_msg_extents *)msg)->count * 16;
}

int gw_msg_extents_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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

int gw_msg_state_encode(struct gw_wbuf *w, const void *msg)
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

size_t gw_msg_state_size(const void *msg)
{
	const struct gw_state *st = ((const struct gw_msg_state *)msg)->st;
	size_t n = 4;

	for (unsigned i = 0; i < st->nr_sections; i++)
		n += GW_SECTION_NAME_MAX + 8 + st->sections[i].len_bytes;
	return n;
}

int gw_msg_state_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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
		if (ret) {	/* the name is the peer's bytes */
			char esc[GW_LOG_STR_MAX(GW_SECTION_NAME_MAX)];

			return WHY("STATE: section %s refused (%s)", gw_log_str(esc, sizeof(esc), name),
				   strerror(-ret));
		}
	}
	return 0;
}

/* ---- ERROR ---- */

int gw_msg_error_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_error *m = msg;
	size_t n = strnlen(m->reason, GW_WIRE_MAX_REASON);

	gw_put_le32(w, m->code);
	gw_put_le16(w, (uint16_t)n);
	gw_put_bytes(w, m->reason, n);
	return gw_wbuf_done(w);
}

size_t gw_msg_error_size(const void *msg)
{
	return 6 + strnlen(((const struct gw_msg_error *)msg)->reason, GW_WIRE_MAX_REASON);
}

int gw_msg_error_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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
	/*
	 * Printable ASCII only; '"' would break the key="value" log format. A
	 * '\' stays: whoever formats the reason escapes it (gw_log_str).
	 */
	for (uint16_t i = 0; i < n; i++)
		m->reason[i] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"') ? s[i] : '?';
	m->reason[n] = 0;
	return 0;
}

/* ---- FDS ---- */

int gw_msg_fds_encode(struct gw_wbuf *w, const void *msg)
{
	const struct gw_msg_fds *m = msg;

	if (m->count > GW_MAX_RAM_BLOCKS)
		return -EINVAL;
	gw_put_le32(w, m->count);
	for (uint32_t i = 0; i < m->count; i++)
		gw_put_le32(w, m->block[i]);
	return gw_wbuf_done(w);
}

size_t gw_msg_fds_size(const void *msg)
{
	return 4 + (size_t)((const struct gw_msg_fds *)msg)->count * 4;
}

int gw_msg_fds_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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

size_t gw_msg_pages_void_size(const void *msg)
{
	const struct gw_msg_pages_void *m = msg;

	return 16 + (size_t)m->count * 8;
}

int gw_msg_pages_void_encode(struct gw_wbuf *w, const void *msg)
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

int gw_msg_pages_void_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len)
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
