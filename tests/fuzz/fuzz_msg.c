/* SPDX-License-Identifier: MIT */
/*
 * Every message decoder (wire/msg.c, wire/msg_postcopy.c) and the frame header decoder, on
 * hostile bytes. Input: one byte choosing the type (0..GW_MSG__MAX), then
 * the payload. Invariants: decoders never read past the payload, never
 * crash, return 0 or -EPROTO (or -ENOMEM for STATE); whatever they accept
 * re-encodes to exactly gw_msg_size() bytes that decode again.
 */
#include <errno.h>
#include <string.h>
#include "fuzz.h"
#include "util/state.h"
#include "wire/frame.h"
#include "wire/msg.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	return 0;
}

/* Encode @m of @type, check the size and that it decodes again. */
static void roundtrip(uint16_t type, union gw_msg *m)
{
	static uint8_t enc[GW_STATE_MAX_BYTES + (1u << 16)];
	struct gw_extent ext[64];
	struct gw_state *st2 = NULL;
	union gw_msg again;
	struct gw_wbuf w;
	size_t len;
	int ret;

	if (type == GW_MSG_EXTENTS) {	/* decoded ranges point into the payload: copy some out */
		if (m->extents.count > 64)
			return;
		for (uint32_t i = 0; i < m->extents.count; i++)
			ext[i] = gw_msg_extents_get(&m->extents, i);
		m->extents.ext = ext;
	}
	if (type == GW_MSG_PC_DIRTY || type == GW_MSG_PC_NEEDED) {	/* words inside the payload: copy out */
		static uint64_t words[GW_WIRE_MAX_MAP_WORDS];

		fuzz_check(m->pc_map.nr_words <= GW_WIRE_MAX_MAP_WORDS, "map piece within its bound");
		for (uint32_t i = 0; i < m->pc_map.nr_words; i++)
			words[i] = gw_msg_pc_map_word(&m->pc_map, i);
		m->pc_map.words = words;
	}
	if (type == GW_MSG_PC_REQ) {	/* pages inside the payload: copy out */
		static uint64_t pages[GW_WIRE_MAX_BATCH_PAGES];

		fuzz_check(m->pc_req.count <= GW_WIRE_MAX_BATCH_PAGES, "request within its bound");
		for (uint32_t i = 0; i < m->pc_req.count; i++)
			pages[i] = gw_msg_pc_req_page(&m->pc_req, i);
		m->pc_req.pages = pages;
	}
	len = gw_msg_size(type, m);
	fuzz_check(len <= sizeof(enc), "encoded size within bounds");
	gw_wbuf_init(&w, enc, sizeof(enc));
	ret = gw_msg_encode(type, m, &w);
	fuzz_check(ret == 0 && w.len == len, "an accepted message encodes to gw_msg_size() bytes");
	memset(&again, 0, sizeof(again));
	if (type == GW_MSG_STATE) {
		st2 = calloc(1, sizeof(*st2));
		gw_state_init(st2);
		again.state.st = st2;
	}
	ret = gw_msg_decode(type, enc, len, &again, NULL, 0);
	fuzz_check(ret == 0, "what the encoder writes, the decoder accepts");
	if (st2) {
		gw_state_release(st2);
		free(st2);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gw_state st;
	uint16_t type;
	union gw_msg m;
	char why[200];
	size_t n;
	int ret;

	if (size < 1)
		return 0;
	type = data[0] % (GW_MSG__MAX + 1);
	data++, size--;
	if (size >= GW_WIRE_HDR_BYTES) {
		struct gw_frame_hdr h;

		ret = gw_frame_hdr_decode(data, &h);
		fuzz_check(!ret || ret == -EPROTO || ret == -EPROTONOSUPPORT, "header decode result");
		fuzz_check(ret || h.len <= gw_frame_max_payload(h.type), "accepted length within the bound");
	}
	if (type == GW_MSG_PAGES) {
		struct gw_msg_pages_hdr ph;

		if (size >= GW_PAGES_HDR_BYTES && !gw_msg_pages_hdr_decode(data, (uint32_t)size, &ph))
			fuzz_check((uint64_t)GW_PAGES_HDR_BYTES + 8ull * ph.nr_entries + gw_pages_crc_bytes(&ph) +
				   ph.data_bytes == size &&
				   ph.nr_entries >= 1 && ph.nr_entries <= GW_WIRE_MAX_BATCH_PAGES,
				   "PAGES sub-header consistent with its frame");
		return 0;
	}
	/* Receivers refuse a longer payload before decoding (frame header check). */
	n = size < gw_msg_max_payload(type) ? size : gw_msg_max_payload(type);
	memset(&m, 0, sizeof(m));
	if (type == GW_MSG_STATE) {
		gw_state_init(&st);
		m.state.st = &st;
	}
	ret = gw_msg_decode(type, data, n, &m, why, sizeof(why));
	fuzz_check(!ret || ret == -EPROTO || (ret == -ENOMEM && type == GW_MSG_STATE), "decode result");
	if (!ret && type != GW_MSG_ERROR && type != 0)
		roundtrip(type, &m);
	if (type == GW_MSG_STATE)
		gw_state_release(&st);
	return 0;
}
