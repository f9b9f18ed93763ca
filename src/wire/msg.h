/* SPDX-License-Identifier: MIT */
/*
 * Typed wire messages: one struct per message type and one encoder and one
 * decoder for each, here and nowhere else. Both sides of the engine and
 * the tests use them. Layouts (payloads, little-endian) are in
 * docs/protocol.md and next to each struct below.
 *
 * Decoders treat their input as hostile: every field is checked (counts,
 * sizes, names, flags) and reserved fields must be zero; trailing bytes are
 * refused. They return 0 or -EPROTO (and a reason in @why where one helps).
 *
 * PAGES is streamed rather than decoded whole: its sub-header is a typed
 * message (gw_msg_pages_hdr), its entries are le64 page entries
 * (wire/wire.h) and its data area is checked by pages_in.c.
 */
#ifndef GW_WIRE_MSG_H
#define GW_WIRE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <godwit/buf.h>
#include <godwit/params.h>
#include <godwit/vm.h>
#include "wire/wire.h"

struct gw_state;

/* HELLO: le32 min_version, le32 max_version, id[16], boot_id[16], le32 page_size,
 * le32 nr_channels, le32 codec (wire), le32 codec_level, le32 flags,
 * le32 batch_pages, le32 nr_blocks, then per block: name[32] (NUL-padded),
 * le64 gpa, le64 size_bytes, le32 page_size, le32 reserved. */
#define GW_MSG_HELLO_FIXED_BYTES 68
#define GW_MSG_HELLO_BLOCK_BYTES 56
#define GW_MSG_HELLO_VM_BYTES 8		/* with GW_HELLO_VM, after the blocks, before the profile */
struct gw_msg_hello {
	uint32_t min_version, max_version;
	uint8_t id[GW_WIRE_ID_BYTES];
	uint8_t boot_id[GW_WIRE_ID_BYTES];	/* the sender's kernel boot: same on both = one clock */
	uint32_t page_size_bytes;
	uint32_t nr_channels;		/* 0 exactly for local migration */
	uint32_t codec;			/* enum gw_wire_codec */
	int32_t codec_level;
	uint32_t flags;			/* GW_HELLO_* */
	uint32_t batch_pages;
	uint32_t nr_blocks;
	struct {
		char name[GW_RAM_NAME_MAX];
		uint64_t gpa, size_bytes;
		uint32_t page_size_bytes;
	} blocks[GW_MAX_RAM_BLOCKS];
	uint32_t nr_vcpus;		/* GW_HELLO_VM: the source VM's vCPUs, else 0 */
	uint32_t profile_bytes;		/* GW_HELLO_VM: 0..GW_WIRE_MAX_PROFILE_BYTES */
	uint8_t profile[GW_WIRE_MAX_PROFILE_BYTES];	/* the source VMM's CPU profile, opaque */
};

/*
 * HELLO_ACK: le32 version, le32 flags (the HELLO flags accepted), boot_id[16],
 * challenge[16] (fresh random bytes of this destination, for this migration).
 */
struct gw_msg_hello_ack {
	uint32_t version;
	uint32_t flags;
	uint8_t boot_id[GW_WIRE_ID_BYTES];
	uint8_t challenge[GW_WIRE_ID_BYTES];
};

/* CHAN_HELLO: id[16], le32 index, challenge[16] (the HELLO_ACK's, echoed). */
struct gw_msg_chan_hello {
	uint8_t id[GW_WIRE_ID_BYTES];
	uint32_t index;
	uint8_t challenge[GW_WIRE_ID_BYTES];
};

/* CHAN_ACK: le32 index. */
struct gw_msg_chan_ack {
	uint32_t index;
};

/* EXTENTS: le32 block, le32 count (1..GW_WIRE_MAX_EXTENTS), count x
 * { le64 first_page, le64 nr_pages } (nr_pages >= 1). */
struct gw_extent {
	uint64_t first_page, nr_pages;
};
struct gw_msg_extents {
	uint32_t block;
	uint32_t count;
	struct gw_extent *ext;		/* encode: count entries; decode: see below */
	const uint8_t *raw;		/* decode: the ranges inside the payload */
};
/* Range @i of a decoded EXTENTS (i < count). */
struct gw_extent gw_msg_extents_get(const struct gw_msg_extents *m, uint32_t i);

/* ROUND: le32 round, le32 reserved, le64 dirty_pages. */
struct gw_msg_round {
	uint32_t round;
	uint64_t dirty_pages;
};

/* PAGES sub-header: le32 block, le32 nr_entries, le32 round, le32 codec
 * (wire), le32 data_bytes, le32 raw_bytes; then nr_entries le64 entries and
 * data_bytes of data area. */
#define GW_PAGES_HDR_BYTES 24
#define GW_PAGES_ENTRY_BYTES 8
struct gw_msg_pages_hdr {
	uint32_t block;			/* index in the HELLO layout */
	uint32_t nr_entries;		/* 1..GW_WIRE_MAX_BATCH_PAGES */
	uint32_t round;
	uint32_t codec;			/* enum gw_wire_codec of the data area (not AUTO) */
	uint32_t flags;			/* GW_PAGES_F_*: the codec word's high 16 bits on the wire */
	uint32_t data_bytes;		/* bytes of the data area as sent */
	uint32_t raw_bytes;		/* bytes of the raw stream (after decompression) */
};
void gw_msg_pages_hdr_encode(uint8_t out[GW_PAGES_HDR_BYTES], const struct gw_msg_pages_hdr *m);
/* Bytes of the per-entry CRC array (0 without GW_PAGES_F_PAGE_CRC). */
static inline uint32_t gw_pages_crc_bytes(const struct gw_msg_pages_hdr *m)
{
	return (m->flags & GW_PAGES_F_PAGE_CRC) ? m->nr_entries * 4u : 0;
}
/* Checks the sub-header against the frame's payload length: 0 or -EPROTO. */
int gw_msg_pages_hdr_decode(const uint8_t in[GW_PAGES_HDR_BYTES], uint32_t frame_len,
			    struct gw_msg_pages_hdr *m);

/*
 * PAGES_VOID: le32 block, le32 seq (of the PAGES frame on this connection),
 * le32 count, le32 reserved, count x le64 page index. The named pages of
 * that frame were written by the guest while they were sent: their page CRC
 * may fail, and they will be sent again.
 */
struct gw_msg_pages_void {
	uint32_t block;
	uint32_t seq;
	uint32_t count;			/* 1..GW_WIRE_MAX_VOID_PAGES */
	uint64_t pages[GW_WIRE_MAX_VOID_PAGES];
};

/* CHAN_END: le32 index, le32 reserved, le64 frames, le64 pages. */
struct gw_msg_chan_end {
	uint32_t index;
	uint64_t frames, pages;		/* PAGES frames and entries sent on the channel */
};

/* STATE: le32 count, then per section name[32] (NUL-padded), le32 version,
 * le32 length, bytes. */
struct gw_msg_state {
	struct gw_state *st;		/* encode: the sections; decode: initialised, filled
					   (NULL: a STATE is refused as unexpected) */
};

/* COMPLETE: le32 nr_channels, le32 flags, le64 total_pages. */
struct gw_msg_complete {
	uint32_t nr_channels;
	uint32_t flags;			/* GW_COMPLETE_* */
	uint64_t total_pages;		/* PAGES entries over all channels */
};

/* READY: le64 load_ns (destination: channels joined, totals checked, state loaded). */
struct gw_msg_ready {
	uint64_t load_ns;
};

/* RESUMED: le64 go_to_resume_ns, le64 resume_mono_ns. GO has no payload. */
struct gw_msg_resumed {
	uint64_t go_to_resume_ns;	/* GO received -> VM resumed, destination clock */
	uint64_t resume_mono_ns;	/* when it resumed, destination CLOCK_MONOTONIC */
};

/* VERIFY: le64 digest lo, le64 digest hi, le64 verify_ns. */
struct gw_msg_verify {
	uint64_t digest_lo, digest_hi;	/* the source's RAM, frozen since the pause */
	uint64_t verify_ns;		/* its time to hash */
};

/* VERIFIED: le32 flags, le32 reserved, le64 lo, le64 hi, le64 verify_ns, le64 faults. */
struct gw_msg_verified {
	uint32_t flags;			/* GW_VERIFIED_* */
	uint64_t digest_lo, digest_hi;	/* the destination's RAM as it was at resume */
	uint64_t verify_ns;		/* its time to hash, while the guest ran */
	uint64_t snapshot_faults;	/* guest writes that waited for a chunk's hash */
};

/*
 * PING and PONG: le64 token (the source's clock when it sent the PING),
 * le64 backlog_bytes (PONG: data the destination's kernel holds for its
 * channels, received and not yet read; PING: 0, not checked).
 */
struct gw_msg_ping {
	uint64_t token;
	uint64_t backlog_bytes;
};

/*
 * Postcopy messages (docs/protocol.md#postcopy). PC_PREPARE and PC_END
 * have no payload.
 */

/* PC_PREPARED: le64 prepare_ns (channels joined, RAM registered, preempt admitted). */
struct gw_msg_pc_prepared {
	uint64_t prepare_ns;
};

/*
 * PC_DIRTY and PC_NEEDED: a piece of one block's page bitmap. le32 block,
 * le32 nr_words (1..GW_WIRE_MAX_MAP_WORDS), le64 first_page (a multiple of
 * 64), then nr_words le64 words: bit i of word w is page first_page + 64 w + i.
 */
struct gw_msg_pc_map {
	uint32_t block;
	uint32_t nr_words;
	uint64_t first_page;
	const uint64_t *words;		/* encode: nr_words words */
	const uint8_t *raw;		/* decode: the words inside the payload */
};
/* Word @i of a decoded map piece (i < nr_words). */
uint64_t gw_msg_pc_map_word(const struct gw_msg_pc_map *m, uint32_t i);
/*
 * The payload of a map piece to send as two parts without a copy: @hdr
 * (16 bytes, filled) and the words where they are, which on a
 * little-endian host are already the wire's form. 0, -EINVAL (a piece
 * gw_msg_encode refuses too), or -EOPNOTSUPP on a big-endian host (then
 * send it with gw_conn_send_msg).
 */
int gw_msg_pc_map_iov(const struct gw_msg_pc_map *m, uint8_t hdr[16], struct iovec iov[2]);

/* PC_REQ: le32 block, le32 count (1..GW_WIRE_MAX_BATCH_PAGES), count x le64 page. */
struct gw_msg_pc_req {
	uint32_t block;
	uint32_t count;
	const uint64_t *pages;		/* encode: count pages */
	const uint8_t *raw;		/* decode: the pages inside the payload */
};
/* Page @i of a decoded request (i < count). */
uint64_t gw_msg_pc_req_page(const struct gw_msg_pc_req *m, uint32_t i);

/*
 * PC_STATS and PC_DONE: le32 reserved, le32 nr_vcpus (<= GW_WIRE_MAX_VCPUS),
 * then 14 le64 in the order of the struct, then nr_vcpus le64 blocktimes.
 */
#define GW_MSG_PC_STATS_FIXED_BYTES (8 + 14 * 8)
struct gw_msg_pc_stats {
	uint32_t nr_vcpus;
	uint64_t remaining_pages;	/* pages not placed yet */
	uint64_t requests;		/* pages asked for on the preempt connection */
	uint64_t placed_requested;	/* pages placed from answers to requests */
	uint64_t placed_pushed;		/* pages placed from the background stream */
	uint64_t dup_pages;		/* copies dropped: the page was placed already */
	uint64_t faults;		/* userfaults read (vCPUs and other threads) */
	uint64_t local_faults;		/* resolved without the network */
	uint64_t blocktime_ns;		/* all vCPUs blocked at once */
	uint64_t vcpu_blocktime_total_ns;	/* summed over vCPUs */
	uint64_t latency_p50_ns, latency_p99_ns, latency_max_ns;	/* fault -> placed */
	uint64_t paused_ns;		/* time paused for recovery */
	uint64_t latency_samples;	/* faults that waited for the network */
	uint64_t vcpu_blocktime_ns[GW_WIRE_MAX_VCPUS];
};

/* PC_RECOVER: id[16], le32 recoveries (informational), le32 reserved. */
struct gw_msg_pc_recover {
	uint8_t id[GW_WIRE_ID_BYTES];
	uint32_t recoveries;
};

/* PC_RECOVERED: le32 flags (GW_PC_RECOVERED_*), le32 reserved, le64 needed_pages. */
struct gw_msg_pc_recovered {
	uint32_t flags;
	uint64_t needed_pages;		/* bits set over every PC_NEEDED sent before */
};

/* ERROR: le32 code, le16 length (<= GW_WIRE_MAX_REASON), reason bytes. */
struct gw_msg_error {
	uint32_t code;			/* enum gw_wire_err */
	char reason[GW_WIRE_MAX_REASON + 1];	/* decode: printable ASCII, '"' replaced */
};

/* FDS: le32 count, count x le32 block index (the fds ride SCM_RIGHTS). */
struct gw_msg_fds {
	uint32_t count;
	uint32_t block[GW_MAX_RAM_BLOCKS];
};

union gw_msg {
	struct gw_msg_hello hello;
	struct gw_msg_hello_ack hello_ack;
	struct gw_msg_chan_hello chan_hello;
	struct gw_msg_chan_ack chan_ack;
	struct gw_msg_extents extents;
	struct gw_msg_round round;
	struct gw_msg_chan_end chan_end;
	struct gw_msg_state state;
	struct gw_msg_complete complete;
	struct gw_msg_ready ready;
	struct gw_msg_resumed resumed;
	struct gw_msg_verify verify;
	struct gw_msg_verified verified;
	struct gw_msg_ping ping;	/* PING and PONG */
	struct gw_msg_error error;
	struct gw_msg_fds fds;
	struct gw_msg_pc_prepared pc_prepared;
	struct gw_msg_pc_map pc_map;	/* PC_DIRTY and PC_NEEDED */
	struct gw_msg_pc_req pc_req;
	struct gw_msg_pc_stats pc_stats;	/* PC_STATS and PC_DONE */
	struct gw_msg_pc_recover pc_recover;
	struct gw_msg_pc_recovered pc_recovered;
	struct gw_msg_pages_void pages_void;
};

/*
 * Encode @m (the struct of @type; NULL for GO) into @w. 0, -ENOSPC, or
 * -EINVAL for PAGES and unknown types.
 */
int gw_msg_encode(uint16_t type, const void *m, struct gw_wbuf *w);
/* Exact payload size of @m encoded as @type. */
size_t gw_msg_size(uint16_t type, const void *m);
/* The largest payload of @type (PAGES included), 0 for unknown types: the frame's length bound. */
uint32_t gw_msg_max_payload(uint16_t type);
/*
 * Decode a payload of @type into @m (the struct of @type). 0, -EPROTO with
 * a reason in @why (may be NULL), -ENOMEM (STATE).
 */
int gw_msg_decode(uint16_t type, const void *buf, size_t len, void *m, char *why, size_t why_len);

/* Error codes: wire <-> -errno (unknown codes give -EPROTO). */
uint32_t gw_wire_err_from_errno(int neg_errno);
int gw_wire_err_to_errno(uint32_t code);
/* Codecs: API id <-> wire number (-EPROTO for numbers that are no codec). */
uint32_t gw_wire_codec_from_id(enum gw_codec_id id);
int gw_wire_codec_to_id(uint32_t wire, enum gw_codec_id *id);

#endif
