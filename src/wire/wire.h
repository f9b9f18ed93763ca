/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol v1. Documented in docs/protocol.md; this header is the
 * definition. Every number here is a fixed wire constant: never put an
 * internal enum on the wire.
 *
 * Frame = 24-byte header + payload, little-endian:
 *   0  le32 magic     0x314d5747 ("GWM1")
 *   4  le16 version   1
 *   6  le16 type      enum below; 0 is never valid
 *   8  le32 flags     per type; unknown bits must be 0
 *  12  le32 length    payload bytes, <= gw_wire_max_payload(type)
 *  16  le32 seq       per connection and direction: 0, 1, 2, ...
 *  20  le32 crc       CRC32C of header (crc field = 0) and payload
 *
 * Receivers check magic, version, type, flags, length bound, seq and CRC
 * before acting on a frame, and every field of its payload before use.
 */
#ifndef GW_WIRE_H
#define GW_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <godwit/vm.h>

#define GW_WIRE_MAGIC		0x314d5747u
#define GW_WIRE_VERSION		1
#define GW_WIRE_HDR_BYTES	24
#define GW_WIRE_ID_BYTES	16
#define GW_WIRE_MAX_BATCH_PAGES	1024	/* entries in one PAGES frame */
#define GW_WIRE_MAX_PAGE_BYTES	4096	/* page sizes accepted: 4 KiB only in v1 */
#define GW_WIRE_MAX_REASON	512
#define GW_WIRE_MAX_EXTENTS	65536	/* per EXTENTS frame */
#define GW_MAX_CHANNELS		64

enum gw_wire_type {
	GW_MSG_HELLO      = 1,	/* src->dst ctl: versions, id, layout, capabilities */
	GW_MSG_HELLO_ACK  = 2,	/* dst->src ctl: accepted version and flags */
	GW_MSG_CHAN_HELLO = 3,	/* src->dst data: migration id + channel index */
	GW_MSG_CHAN_ACK   = 4,	/* dst->src data */
	GW_MSG_EXTENTS    = 5,	/* src->dst ctl: populated ranges (pre-populate hint) */
	GW_MSG_ROUND      = 6,	/* src->dst ctl: round k starts */
	GW_MSG_PAGES      = 7,	/* src->dst data: a batch of pages */
	GW_MSG_CHAN_END   = 8,	/* src->dst data: no more pages on this channel */
	GW_MSG_STATE      = 9,	/* src->dst ctl: device state sections */
	GW_MSG_COMPLETE   = 10,	/* src->dst ctl: totals and RAM digest */
	GW_MSG_READY      = 11,	/* dst->src ctl: everything loaded and checked */
	GW_MSG_GO         = 12,	/* src->dst ctl: resume, the source gives the VM up */
	GW_MSG_RESUMED    = 13,	/* dst->src ctl: the VM runs here */
	GW_MSG_ERROR      = 14,	/* either way, any connection: code + reason */
	GW_MSG_FDS        = 15,	/* src->dst ctl, unix only: RAM fds by SCM_RIGHTS */
	GW_MSG__MAX       = 15,
};

/* Error codes on the wire (ERROR.code): fixed numbers, mapped to -errno. */
enum gw_wire_err {
	GW_WERR_PROTO     = 1,	/* malformed or unexpected frame */
	GW_WERR_CHECKSUM  = 2,	/* CRC mismatch */
	GW_WERR_TIMEOUT   = 3,
	GW_WERR_CANCELLED = 4,
	GW_WERR_VERSION   = 5,	/* no common version / unsupported feature */
	GW_WERR_LAYOUT    = 6,	/* RAM layout refused */
	GW_WERR_STATE     = 7,	/* device state refused */
	GW_WERR_NOMEM     = 8,
	GW_WERR_VERIFY    = 9,	/* RAM digest mismatch */
	GW_WERR_INTERNAL  = 10,
	GW_WERR_BUSY      = 11,	/* destination already migrating */
	GW_WERR_DENIED    = 12,	/* unknown migration id */
	GW_WERR_COMPRESS  = 13,	/* corrupt compressed payload */
};
int gw_wire_err_from_errno(int neg_errno);
int gw_wire_err_to_errno(uint32_t code);	/* -errno; -EPROTO for unknown codes */

/* PAGES entry kinds (low 4 bits of an entry). */
enum gw_page_kind {
	GW_PAGE_NORMAL = 1,	/* page_size bytes in the raw stream */
	GW_PAGE_ZERO   = 2,	/* nothing in the stream */
	GW_PAGE_XBZRLE = 3,	/* le16 length + delta in the raw stream */
};

/* Flags. */
#define GW_HELLO_LOCAL		(1u << 0)
#define GW_HELLO_VERIFY		(1u << 1)
#define GW_HELLO_XBZRLE		(1u << 2)
#define GW_HELLO_FLAGS_ALL	(GW_HELLO_LOCAL | GW_HELLO_VERIFY | GW_HELLO_XBZRLE)
#define GW_COMPLETE_DIGEST	(1u << 0)
#define GW_READY_VERIFIED	(1u << 0)	/* digest compared and equal */

struct gw_frame_hdr {			/* decoded header, host order */
	uint16_t version;
	uint16_t type;
	uint32_t flags;
	uint32_t len;
	uint32_t seq;
	uint32_t crc;
};

/* Upper bound of the payload of each type (0 for unknown types). */
uint32_t gw_wire_max_payload(uint16_t type);
const char *gw_wire_type_name(uint16_t type);
/* Encode a header with crc = 0. */
void gw_wire_hdr_encode(uint8_t out[GW_WIRE_HDR_BYTES], uint16_t type, uint32_t flags,
			uint32_t len, uint32_t seq);
void gw_wire_hdr_set_crc(uint8_t hdr[GW_WIRE_HDR_BYTES], uint32_t crc);
/*
 * Decode and check magic, version, type, length bound. 0, -EPROTO
 * (bad magic, type, length), -EPROTONOSUPPORT (version). The CRC and seq
 * are checked by the connection layer.
 */
int gw_wire_hdr_decode(const uint8_t in[GW_WIRE_HDR_BYTES], struct gw_frame_hdr *h);

/* ---- bounded payload writer / reader ---- */
struct gw_wbuf {
	uint8_t *p;
	size_t len, cap;
	bool overflow;			/* sticky: a put did not fit */
};
void gw_wbuf_init(struct gw_wbuf *w, void *buf, size_t cap);
void gw_put_u8(struct gw_wbuf *w, uint8_t v);
void gw_put_le16(struct gw_wbuf *w, uint16_t v);
void gw_put_le32(struct gw_wbuf *w, uint32_t v);
void gw_put_le64(struct gw_wbuf *w, uint64_t v);
void gw_put_bytes(struct gw_wbuf *w, const void *src, size_t n);

struct gw_rbuf {
	const uint8_t *p;
	size_t len, off;
	bool underrun;			/* sticky: a get ran past the end */
};
void gw_rbuf_init(struct gw_rbuf *r, const void *buf, size_t len);
uint8_t gw_get_u8(struct gw_rbuf *r);
uint16_t gw_get_le16(struct gw_rbuf *r);
uint32_t gw_get_le32(struct gw_rbuf *r);
uint64_t gw_get_le64(struct gw_rbuf *r);
/* Pointer to n bytes inside the buffer, or NULL (and underrun) */
const void *gw_get_bytes(struct gw_rbuf *r, size_t n);
/* -EPROTO when underrun or bytes are left over, else 0. */
int gw_rbuf_done(const struct gw_rbuf *r);

/* ---- messages ---- */
struct gw_msg_hello {
	uint32_t min_version, max_version;
	uint8_t id[GW_WIRE_ID_BYTES];
	uint32_t page_size_bytes;
	uint32_t nr_channels;
	uint32_t codec, codec_level;	/* codec: wire id == enum gw_codec_id value */
	uint32_t flags;			/* GW_HELLO_* */
	uint32_t batch_pages;
	uint32_t nr_blocks;
	struct {
		char name[GW_RAM_NAME_MAX];
		uint64_t gpa, size_bytes;
		uint32_t page_size_bytes;
	} blocks[GW_MAX_RAM_BLOCKS];
};
int gw_msg_hello_encode(struct gw_wbuf *w, const struct gw_msg_hello *m);
/* Validates everything: counts, names (NUL inside, non-empty, unique), sizes. */
int gw_msg_hello_decode(const void *buf, size_t len, struct gw_msg_hello *m,
			char *why, size_t why_len);

struct gw_msg_pages_hdr {
	uint32_t block;			/* index in the HELLO layout */
	uint32_t nr_entries;		/* 1..GW_WIRE_MAX_BATCH_PAGES */
	uint32_t round;
	uint32_t codec;			/* enum gw_codec_id of the data area */
	uint32_t data_bytes;		/* bytes of the data area as sent */
	uint32_t raw_bytes;		/* bytes of the raw stream (after decompression) */
};
#define GW_PAGES_HDR_BYTES 24
#define GW_PAGES_ENTRY_BYTES 8
void gw_msg_pages_hdr_encode(uint8_t out[GW_PAGES_HDR_BYTES], const struct gw_msg_pages_hdr *m);
/* Checks the header against the frame length: 0 or -EPROTO. */
int gw_msg_pages_hdr_decode(const uint8_t in[GW_PAGES_HDR_BYTES], uint32_t frame_len,
			    struct gw_msg_pages_hdr *m);
static inline uint64_t gw_page_entry(uint64_t page_index, enum gw_page_kind kind)
{ return page_index << 4 | (uint64_t)kind; }

struct gw_msg_error {
	uint32_t code;			/* enum gw_wire_err */
	char reason[GW_WIRE_MAX_REASON + 1];	/* NUL-terminated, printable ASCII only */
};
int gw_msg_error_encode(struct gw_wbuf *w, uint32_t code, const char *reason);
/* Non-printable bytes are replaced by '?'. 0 or -EPROTO. */
int gw_msg_error_decode(const void *buf, size_t len, struct gw_msg_error *m);

/* STATE: le32 count, then per section name[32] le32 version le32 len bytes. */
struct gw_state;
int gw_msg_state_encode(struct gw_wbuf *w, const struct gw_state *st);
size_t gw_msg_state_size(const struct gw_state *st);
/* Validates and copies into @st (initialised). 0, -EPROTO, -ENOMEM. */
int gw_msg_state_decode(const void *buf, size_t len, struct gw_state *st);

#endif
