/* SPDX-License-Identifier: MIT */
/*
 * Typed wire messages (see wire/msg.h): the table of every message type
 * (codec, size bound), the dispatch, the PAGES sub-header, wire numbers.
 * Each payload layout is written down once, in its family's file:
 * wire/msg_session.c, wire/msg_data.c (wire/msg_codecs.h), and
 * wire/msg_postcopy.c. Everything decoded is hostile: each decoder checks
 * every field before the caller may use it, reserved fields must be zero,
 * and trailing bytes are refused (gw_msg_decode).
 */
#include "wire/msg_codecs.h"

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
	[GW_MSG_HELLO]      = { gw_msg_hello_encode, gw_msg_hello_decode, gw_msg_hello_size,
				GW_MSG_HELLO_FIXED_BYTES + GW_MAX_RAM_BLOCKS * GW_MSG_HELLO_BLOCK_BYTES +
				GW_MSG_HELLO_VM_BYTES + GW_WIRE_MAX_PROFILE_BYTES },
	[GW_MSG_HELLO_ACK]  = { gw_msg_hello_ack_encode, gw_msg_hello_ack_decode, NULL, 8 + 2 * GW_WIRE_ID_BYTES },
	[GW_MSG_CHAN_HELLO] = { gw_msg_chan_hello_encode, gw_msg_chan_hello_decode, NULL, 2 * GW_WIRE_ID_BYTES + 4 },
	[GW_MSG_CHAN_ACK]   = { gw_msg_chan_ack_encode, gw_msg_chan_ack_decode, NULL, 4 },
	[GW_MSG_EXTENTS]    = { gw_msg_extents_encode, gw_msg_extents_decode, gw_msg_extents_size,
				8 + GW_WIRE_MAX_EXTENTS * 16 },
	[GW_MSG_ROUND]      = { gw_msg_round_encode, gw_msg_round_decode, NULL, 16 },
	[GW_MSG_PAGES]      = { NULL, NULL, NULL, PAGES_MAX_BYTES },
	[GW_MSG_CHAN_END]   = { gw_msg_chan_end_encode, gw_msg_chan_end_decode, NULL, 24 },
	[GW_MSG_STATE]      = { gw_msg_state_encode, gw_msg_state_decode, gw_msg_state_size, STATE_MAX_BYTES },
	[GW_MSG_COMPLETE]   = { gw_msg_complete_encode, gw_msg_complete_decode, NULL, 16 },
	[GW_MSG_READY]      = { gw_msg_ready_encode, gw_msg_ready_decode, NULL, 8 },
	[GW_MSG_GO]         = { gw_msg_go_encode, gw_msg_go_decode, NULL, 0 },
	[GW_MSG_RESUMED]    = { gw_msg_resumed_encode, gw_msg_resumed_decode, NULL, 16 },
	[GW_MSG_ERROR]      = { gw_msg_error_encode, gw_msg_error_decode, gw_msg_error_size, 6 + GW_WIRE_MAX_REASON },
	[GW_MSG_FDS]        = { gw_msg_fds_encode, gw_msg_fds_decode, gw_msg_fds_size, 4 + GW_MAX_RAM_BLOCKS * 4 },
	[GW_MSG_VERIFY]     = { gw_msg_verify_encode, gw_msg_verify_decode, NULL, 24 },
	[GW_MSG_VERIFIED]   = { gw_msg_verified_encode, gw_msg_verified_decode, NULL, 40 },
	[GW_MSG_PING]       = { gw_msg_ping_encode, gw_msg_ping_decode, NULL, 16 },
	[GW_MSG_PONG]       = { gw_msg_ping_encode, gw_msg_ping_decode, NULL, 16 },
	/* Postcopy: wire/msg_postcopy.c. */
	[GW_MSG_PC_PREPARE] = { gw_msg_go_encode, gw_msg_go_decode, NULL, 0 },
	[GW_MSG_PC_PREPARED] = { gw_pc_prepared_encode, gw_pc_prepared_decode, NULL, 8 },
	[GW_MSG_PC_DIRTY]   = { gw_pc_map_encode, gw_pc_map_decode, gw_pc_map_size, GW_MSG_PC_MAP_MAX_BYTES },
	[GW_MSG_PC_REQ]     = { gw_pc_req_encode, gw_pc_req_decode, gw_pc_req_size, GW_MSG_PC_REQ_MAX_BYTES },
	[GW_MSG_PC_STATS]   = { gw_pc_stats_encode, gw_pc_stats_decode, gw_pc_stats_size, GW_MSG_PC_STATS_MAX_BYTES },
	[GW_MSG_PC_DONE]    = { gw_pc_stats_encode, gw_pc_stats_decode, gw_pc_stats_size, GW_MSG_PC_STATS_MAX_BYTES },
	[GW_MSG_PC_END]     = { gw_msg_go_encode, gw_msg_go_decode, NULL, 0 },
	[GW_MSG_PC_RECOVER] = { gw_pc_recover_encode, gw_pc_recover_decode, NULL, GW_WIRE_ID_BYTES + 8 },
	[GW_MSG_PC_NEEDED]  = { gw_pc_map_encode, gw_pc_map_decode, gw_pc_map_size, GW_MSG_PC_MAP_MAX_BYTES },
	[GW_MSG_PC_RECOVERED] = { gw_pc_recovered_encode, gw_pc_recovered_decode, NULL, 16 },
	[GW_MSG_PAGES_VOID] = { gw_msg_pages_void_encode, gw_msg_pages_void_decode, gw_msg_pages_void_size,
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
