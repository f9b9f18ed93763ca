/* SPDX-License-Identifier: MIT */
/*
 * The payload codecs of the non-postcopy messages, by family, for the table
 * in wire/msg.c (nothing else calls them: use gw_msg_encode/decode):
 *
 *   wire/msg_session.c  HELLO and the small fixed messages (HELLO_ACK,
 *                       CHAN_HELLO/ACK, ROUND, CHAN_END, COMPLETE, READY,
 *                       RESUMED, VERIFY, VERIFIED, PING/PONG, GO)
 *   wire/msg_data.c     EXTENTS, STATE, ERROR, FDS, PAGES_VOID
 *
 * Each decoder checks every field (hostile input) and returns 0 or -EPROTO
 * with @why; each encoder returns gw_wbuf_done() or -EINVAL.
 */
#ifndef GW_WIRE_MSG_CODECS_H
#define GW_WIRE_MSG_CODECS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "util/state.h"
#include "wire/frame.h"
#include "wire/msg.h"
#include "wire/msg_postcopy.h"

#define WHY(...) (why ? snprintf(why, why_len, __VA_ARGS__) : 0, -EPROTO)

/* ---- msg_session.c ---- */

int gw_msg_hello_encode(struct gw_wbuf *w, const void *msg);
size_t gw_msg_hello_size(const void *msg);
int gw_msg_hello_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_hello_ack_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_hello_ack_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_chan_hello_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_chan_hello_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_chan_ack_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_chan_ack_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_round_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_round_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_chan_end_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_chan_end_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_complete_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_complete_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_ready_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_ready_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_resumed_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_resumed_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_verify_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_verify_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_verified_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_verified_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_ping_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_ping_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_go_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_go_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);

/* ---- msg_data.c ---- */

int gw_msg_extents_encode(struct gw_wbuf *w, const void *msg);
size_t gw_msg_extents_size(const void *msg);
int gw_msg_extents_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_state_encode(struct gw_wbuf *w, const void *msg);
size_t gw_msg_state_size(const void *msg);
int gw_msg_state_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_error_encode(struct gw_wbuf *w, const void *msg);
size_t gw_msg_error_size(const void *msg);
int gw_msg_error_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
int gw_msg_fds_encode(struct gw_wbuf *w, const void *msg);
size_t gw_msg_fds_size(const void *msg);
int gw_msg_fds_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);
size_t gw_msg_pages_void_size(const void *msg);
int gw_msg_pages_void_encode(struct gw_wbuf *w, const void *msg);
int gw_msg_pages_void_decode(struct gw_rbuf *r, void *msg, char *why, size_t why_len);

#endif
