/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol v1: the constants. Documented in docs/protocol.md; this
 * header is the definition. Every number here is a fixed wire constant:
 * internal and API enums never go on the wire, they are mapped to these in
 * one place (wire/msg.c for codecs, the page kinds are wire numbers).
 *
 * Frame = 24-byte header (wire/frame.h) + payload, little-endian. Message
 * payloads are encoded and decoded only by wire/msg.c.
 */
#ifndef GW_WIRE_H
#define GW_WIRE_H

#include <stdint.h>
#include <godwit/vm.h>

#define GW_WIRE_MAGIC		0x314d5747u	/* "GWM1" */
#define GW_WIRE_VERSION		3
/*
 * The releases that speak each wire version (docs/protocol.md,
 * "Compatibility"): 2 is godwit 0.2.x, 3 is 0.3.x. A refusal names the
 * peer's release from its version through gw_wire_release().
 */
#define GW_WIRE_VERSION_FIRST	2	/* the oldest version a tagged release speaks */
#define GW_WIRE_HDR_BYTES	24
#define GW_WIRE_ID_BYTES	16		/* migration id, boot id */
#define GW_WIRE_PAGE_BYTES	GW_PAGE_BYTES	/* page sizes accepted: 4 KiB only in v1 */
#define GW_WIRE_MAX_BATCH_PAGES	1024		/* entries in one PAGES frame */
#define GW_WIRE_MAX_REASON	512		/* bytes of an ERROR reason */
#define GW_WIRE_MAX_EXTENTS	65536		/* ranges in one EXTENTS frame */
#define GW_WIRE_MAX_CHANNELS	64
#define GW_WIRE_MAX_BLOCKS	GW_MAX_RAM_BLOCKS
#define GW_WIRE_MAX_MAP_WORDS	8192		/* 64-bit words in one PC_DIRTY / PC_NEEDED */
#define GW_WIRE_MAX_VCPUS	64		/* per-vCPU figures in PC_STATS / PC_DONE */

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
	GW_MSG_VERIFY     = 16,	/* src->dst ctl, after RESUMED: the source's RAM digest */
	GW_MSG_VERIFIED   = 17,	/* dst->src ctl: the destination's digest, and whether equal */
	GW_MSG_PING       = 18,	/* src->dst ctl, precopy: round-trip probe */
	GW_MSG_PONG       = 19,	/* dst->src ctl: the PING's token, echoed at once */
	/* Postcopy (docs/protocol.md#postcopy; codecs in wire/msg_postcopy.c). */
	GW_MSG_PC_PREPARE  = 20,	/* src->dst ctl: channels ended; get ready to run with RAM missing */
	GW_MSG_PC_PREPARED = 21,	/* dst->src ctl: channels joined, RAM registered, preempt admitted */
	GW_MSG_PC_DIRTY    = 22,	/* src->dst ctl, paused: bitmap piece of pages not to trust */
	GW_MSG_PC_REQ      = 23,	/* dst->src preempt: pages a fault waits for */
	GW_MSG_PC_STATS    = 24,	/* dst->src ctl: the destination's postcopy figures */
	GW_MSG_PC_DONE     = 25,	/* dst->src ctl: every page placed (final figures) */
	GW_MSG_PC_END      = 26,	/* src->dst ctl: PC_DONE seen; postcopy over */
	GW_MSG_PC_RECOVER  = 27,	/* src->dst ctl: first frame of a recovery (migration id) */
	GW_MSG_PC_NEEDED   = 28,	/* dst->src ctl, recovery: bitmap piece of pages still missing */
	GW_MSG_PC_RECOVERED = 29,	/* dst->src ctl, recovery: the map is complete */
	GW_MSG_PAGES_VOID = 30,	/* src->dst data: pages of an earlier PAGES frame written while sent */
	GW_MSG__MAX       = 30,
};

/* Error codes on the wire (ERROR.code): fixed numbers, mapped to -errno in msg.c. */
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

/* Codecs of a PAGES data area (and HELLO's configured codec). */
enum gw_wire_codec {
	GW_WIRE_CODEC_NONE = 0,
	GW_WIRE_CODEC_ZSTD = 1,	/* one zstd frame */
	GW_WIRE_CODEC_LZ4  = 2,	/* one raw LZ4 block */
	GW_WIRE_CODEC_ZLIB = 3,	/* zlib format (zlib or ISA-L on the sender) */
	GW_WIRE_CODEC_ISAL = 4,	/* zlib format written by ISA-L */
	GW_WIRE_CODEC_AUTO = 5,	/* HELLO only: chosen per batch */
	GW_WIRE_CODEC__MAX = 5,
};

/* PAGES entry: le64 = page index << 4 | kind. */
enum gw_page_kind {
	GW_PAGE_NORMAL = 1,	/* GW_WIRE_PAGE_BYTES bytes in the raw stream */
	GW_PAGE_ZERO   = 2,	/* nothing in the stream */
	GW_PAGE_XBZRLE = 3,	/* le16 length + delta in the raw stream */
};
#define GW_PAGE_KIND_BITS 4

static inline uint64_t gw_page_entry(uint64_t page_index, enum gw_page_kind kind)
{
	return page_index << GW_PAGE_KIND_BITS | (uint64_t)kind;
}
static inline uint64_t gw_page_entry_page(uint64_t entry)
{
	return entry >> GW_PAGE_KIND_BITS;
}
static inline unsigned gw_page_entry_kind(uint64_t entry)
{
	return (unsigned)(entry & ((1u << GW_PAGE_KIND_BITS) - 1));
}

/*
 * PAGES flags, in the high 16 bits of the sub-header's codec word.
 * PAGE_CRC: a CRC32C per entry follows the entries (le32 each; 0 for ZERO
 * entries, else over the entry's record in the raw stream: the page, or
 * the XBZRLE le16 length and delta); the frame header's CRC then covers
 * the header, sub-header, entries and CRC array, and the data area is
 * checked page by page after decompression. A page sent from live guest
 * memory that the guest wrote while it was being sent may fail its check;
 * the source, whose dirty tracking saw the write, names it in a PAGES_VOID
 * frame and sends it again later (docs/protocol.md).
 */
#define GW_PAGES_F_PAGE_CRC	(1u << 16)
/*
 * SETTLE_NEXT (with PAGE_CRC): the sender knows at once which pages changed
 * while sent (its send copied them): a page that fails its CRC must be
 * named by a PAGES_VOID that is the very next frame on the connection, or
 * the frame is corrupt. Without it (MSG_ZEROCOPY) the PAGES_VOID may come
 * any time before CHAN_END.
 */
#define GW_PAGES_F_SETTLE_NEXT	(1u << 17)
#define GW_PAGES_FLAGS_ALL	(GW_PAGES_F_PAGE_CRC | GW_PAGES_F_SETTLE_NEXT)
#define GW_WIRE_MAX_VOID_PAGES	GW_WIRE_MAX_BATCH_PAGES	/* pages named in one PAGES_VOID */

/* Flags. */
#define GW_HELLO_LOCAL		(1u << 0)	/* RAM fds follow in FDS, no pages */
#define GW_HELLO_VERIFY		(1u << 1)	/* digests compared after RESUMED (VERIFY) */
#define GW_HELLO_XBZRLE		(1u << 2)	/* PAGES may hold XBZRLE entries */
#define GW_HELLO_POSTCOPY	(1u << 3)	/* the source may switch to postcopy */
/*
 * The VM part follows the blocks (le32 nr_vcpus, le32 profile_bytes, then
 * the source VMM's CPU profile, opaque): what the destination checks before
 * round 0 besides the layout. A part is appended behind a flag of its own: a destination that
 * does not know the flag refuses the HELLO at once, naming it.
 */
#define GW_HELLO_VM		(1u << 4)
#define GW_HELLO_FLAGS_ALL	(GW_HELLO_LOCAL | GW_HELLO_VERIFY | GW_HELLO_XBZRLE | GW_HELLO_POSTCOPY | \
				 GW_HELLO_VM)
#define GW_WIRE_MAX_HELLO_VCPUS	4096	/* HELLO's nr_vcpus: 1..this */
#define GW_WIRE_MAX_PROFILE_BYTES 1024	/* HELLO's CPU profile (GW_CPU_PROFILE_MAX_BYTES) */
#define GW_COMPLETE_POSTCOPY	(1u << 0)	/* the destination resumes with RAM missing */
#define GW_COMPLETE_FLAGS_ALL	GW_COMPLETE_POSTCOPY
#define GW_PC_RECOVERED_DONE	(1u << 0)	/* nothing is missing any more */
#define GW_VERIFIED_MATCH	(1u << 0)	/* the two digests are equal */
#define GW_VERIFIED_UNAVAILABLE	(1u << 1)	/* no digest as at resume here (no uffd-wp) */
#define GW_VERIFIED_FLAGS_ALL	(GW_VERIFIED_MATCH | GW_VERIFIED_UNAVAILABLE)

#endif
