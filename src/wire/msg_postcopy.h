/* SPDX-License-Identifier: MIT */
/*
 * Codecs of the postcopy messages, registered in the message table of
 * wire/msg.c (the structs are in wire/msg.h). Private to wire/: everything
 * else encodes and decodes through gw_msg_encode() / gw_msg_decode().
 */
#ifndef GW_WIRE_MSG_POSTCOPY_H
#define GW_WIRE_MSG_POSTCOPY_H

#include <stddef.h>
#include <godwit/buf.h>
#include "wire/msg.h"

#define GW_MSG_PC_MAP_MAX_BYTES (16 + GW_WIRE_MAX_MAP_WORDS * 8)
#define GW_MSG_PC_REQ_MAX_BYTES (8 + GW_WIRE_MAX_BATCH_PAGES * 8)
#define GW_MSG_PC_STATS_MAX_BYTES (GW_MSG_PC_STATS_FIXED_BYTES + GW_WIRE_MAX_VCPUS * 8)

int gw_pc_prepared_encode(struct gw_wbuf *w, const void *m);
int gw_pc_prepared_decode(struct gw_rbuf *r, void *m, char *why, size_t why_len);
int gw_pc_map_encode(struct gw_wbuf *w, const void *m);
int gw_pc_map_decode(struct gw_rbuf *r, void *m, char *why, size_t why_len);
size_t gw_pc_map_size(const void *m);
int gw_pc_req_encode(struct gw_wbuf *w, const void *m);
int gw_pc_req_decode(struct gw_rbuf *r, void *m, char *why, size_t why_len);
size_t gw_pc_req_size(const void *m);
int gw_pc_stats_encode(struct gw_wbuf *w, const void *m);
int gw_pc_stats_decode(struct gw_rbuf *r, void *m, char *why, size_t why_len);
size_t gw_pc_stats_size(const void *m);
int gw_pc_recover_encode(struct gw_wbuf *w, const void *m);
int gw_pc_recover_decode(struct gw_rbuf *r, void *m, char *why, size_t why_len);
int gw_pc_recovered_encode(struct gw_wbuf *w, const void *m);
int gw_pc_recovered_decode(struct gw_rbuf *r, void *m, char *why, size_t why_len);

#endif
