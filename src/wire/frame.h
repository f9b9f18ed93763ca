/* SPDX-License-Identifier: MIT */
/*
 * The frame header, 24 bytes, little-endian:
 *   0  le32 magic     GW_WIRE_MAGIC ("GWM1")
 *   4  le16 version   GW_WIRE_VERSION
 *   6  le16 type      enum gw_wire_type; 0 is never valid
 *   8  le32 flags     none defined in v1: must be 0
 *  12  le32 length    payload bytes, <= gw_frame_max_payload(type)
 *  16  le32 seq       per connection and direction: 0, 1, 2, ...
 *  20  le32 crc       CRC32C of header (crc field = 0) and payload
 *
 * Receivers check magic, version, type, flags and the length bound here,
 * seq and CRC in the connection layer (net/io.c), before acting on a frame.
 */
#ifndef GW_WIRE_FRAME_H
#define GW_WIRE_FRAME_H

#include <stdint.h>
#include "wire/wire.h"

struct gw_frame_hdr {			/* decoded header, host order */
	uint16_t version;
	uint16_t type;
	uint32_t flags;
	uint32_t len;
	uint32_t seq;
	uint32_t crc;
};

/* Upper bound of the payload of each type (0 for unknown types). */
uint32_t gw_frame_max_payload(uint16_t type);
/* "HELLO", ... or "UNKNOWN". */
const char *gw_frame_type_name(uint16_t type);
/* Encode a header with crc = 0. */
void gw_frame_hdr_encode(uint8_t out[GW_WIRE_HDR_BYTES], uint16_t type, uint32_t len, uint32_t seq);
void gw_frame_hdr_set_crc(uint8_t hdr[GW_WIRE_HDR_BYTES], uint32_t crc);
/*
 * Decode and check magic, version, type, flags, length bound. 0, -EPROTO
 * (bad magic, type, flags, length), -EPROTONOSUPPORT (version).
 */
int gw_frame_hdr_decode(const uint8_t in[GW_WIRE_HDR_BYTES], struct gw_frame_hdr *h);
/*
 * The godwit releases that speak wire @version, for a refusal a user reads:
 * "godwit 0.2.x", or "a godwit release this one does not know" (a version
 * below GW_WIRE_VERSION_FIRST or above GW_WIRE_VERSION). Static storage.
 */
const char *gw_wire_release(unsigned version);
/*
 * Why gw_frame_hdr_decode refused @in, in words ("" when it would not):
 * the magic, the version (both versions and their releases named), the type, the length against the
 * type's maximum, the flags.
 */
void gw_frame_hdr_why(const uint8_t in[GW_WIRE_HDR_BYTES], char *why, size_t why_len);

#endif
