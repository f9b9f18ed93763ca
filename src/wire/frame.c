/* SPDX-License-Identifier: MIT */
/* Frame headers (see wire/frame.h and docs/protocol.md). */
#include <errno.h>
#include <stdio.h>
#include <godwit/buf.h>
#include <godwit/version.h>
#include "wire/frame.h"
#include "wire/msg.h"

static const char *const frame_names[GW_MSG__MAX + 1] = {
	[GW_MSG_HELLO] = "HELLO", [GW_MSG_HELLO_ACK] = "HELLO_ACK", [GW_MSG_CHAN_HELLO] = "CHAN_HELLO",
	[GW_MSG_CHAN_ACK] = "CHAN_ACK", [GW_MSG_EXTENTS] = "EXTENTS", [GW_MSG_ROUND] = "ROUND",
	[GW_MSG_PAGES] = "PAGES", [GW_MSG_CHAN_END] = "CHAN_END", [GW_MSG_STATE] = "STATE",
	[GW_MSG_COMPLETE] = "COMPLETE", [GW_MSG_READY] = "READY", [GW_MSG_GO] = "GO",
	[GW_MSG_RESUMED] = "RESUMED", [GW_MSG_ERROR] = "ERROR", [GW_MSG_FDS] = "FDS",
	[GW_MSG_VERIFY] = "VERIFY", [GW_MSG_VERIFIED] = "VERIFIED", [GW_MSG_PING] = "PING",
	[GW_MSG_PONG] = "PONG", [GW_MSG_PC_PREPARE] = "PC_PREPARE", [GW_MSG_PC_PREPARED] = "PC_PREPARED",
	[GW_MSG_PC_DIRTY] = "PC_DIRTY", [GW_MSG_PC_REQ] = "PC_REQ", [GW_MSG_PC_STATS] = "PC_STATS",
	[GW_MSG_PC_DONE] = "PC_DONE", [GW_MSG_PC_END] = "PC_END", [GW_MSG_PC_RECOVER] = "PC_RECOVER",
	[GW_MSG_PC_NEEDED] = "PC_NEEDED", [GW_MSG_PC_RECOVERED] = "PC_RECOVERED",
	[GW_MSG_PAGES_VOID] = "PAGES_VOID",
};

/* The length bound every receiver checks first: the message table's (wire/msg.c). */
uint32_t gw_frame_max_payload(uint16_t type)
{
	return gw_msg_max_payload(type);
}

const char *gw_frame_type_name(uint16_t type)
{
	return type >= 1 && type <= GW_MSG__MAX ? frame_names[type] : "UNKNOWN";
}

void gw_frame_hdr_encode(uint8_t out[GW_WIRE_HDR_BYTES], uint16_t type, uint32_t len, uint32_t seq)
{
	gw_le32_put(out, GW_WIRE_MAGIC);
	gw_le16_put(out + 4, GW_WIRE_VERSION);
	gw_le16_put(out + 6, type);
	gw_le32_put(out + 8, 0);
	gw_le32_put(out + 12, len);
	gw_le32_put(out + 16, seq);
	gw_le32_put(out + 20, 0);
}

void gw_frame_hdr_set_crc(uint8_t hdr[GW_WIRE_HDR_BYTES], uint32_t crc)
{
	gw_le32_put(hdr + 20, crc);
}

int gw_frame_hdr_decode(const uint8_t in[GW_WIRE_HDR_BYTES], struct gw_frame_hdr *h)
{
	if (gw_le32_get(in) != GW_WIRE_MAGIC)
		return -EPROTO;
	h->version = gw_le16_get(in + 4);
	h->type = gw_le16_get(in + 6);
	h->flags = gw_le32_get(in + 8);
	h->len = gw_le32_get(in + 12);
	h->seq = gw_le32_get(in + 16);
	h->crc = gw_le32_get(in + 20);
	if (h->version != GW_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	if (h->type == 0 || h->type > GW_MSG__MAX)
		return -EPROTO;
	if (h->len > gw_frame_max_payload(h->type))
		return -EPROTO;
	if (h->flags)
		return -EPROTO;	/* no type defines header flags */
	return 0;
}

const char *gw_wire_release(unsigned version)
{
	static const char *const releases[] = { [2] = "godwit 0.2.x", [3] = "godwit 0.3.x" };

	_Static_assert(sizeof(releases) / sizeof(releases[0]) == GW_WIRE_VERSION + 1,
		       "a new wire version names its release here");
	if (version < GW_WIRE_VERSION_FIRST || version > GW_WIRE_VERSION)
		return "a godwit release this one does not know";
	return releases[version];
}

void gw_frame_hdr_why(const uint8_t in[GW_WIRE_HDR_BYTES], char *why, size_t why_len)
{
	struct gw_frame_hdr h;
	int ret = gw_frame_hdr_decode(in, &h);

	if (!why_len)
		return;
	if (!ret)
		why[0] = 0;
	else if (gw_le32_get(in) != GW_WIRE_MAGIC)
		snprintf(why, why_len, "not a godwit frame (no GWM1 magic)");
	else if (ret == -EPROTONOSUPPORT)
		snprintf(why, why_len, "a frame of wire version %u (%s); this side speaks version %u "
			 "(godwit %s): releases of different wire versions do not migrate to each other, "
			 "run releases of one wire version on both hosts", h.version, gw_wire_release(h.version),
			 GW_WIRE_VERSION, GW_VERSION_STRING);
	else if (h.type == 0 || h.type > GW_MSG__MAX)
		snprintf(why, why_len, "unknown frame type %u", h.type);
	else if (h.len > gw_frame_max_payload(h.type))
		snprintf(why, why_len, "a %s frame of %u bytes, above its maximum of %u", gw_frame_type_name(h.type),
			 h.len, gw_frame_max_payload(h.type));
	else
		snprintf(why, why_len, "header flags 0x%x set (no frame type defines any)", h.flags);
}
