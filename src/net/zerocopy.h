/* SPDX-License-Identifier: MIT */
/*
 * MSG_ZEROCOPY on kernel TCP sockets: the kernel sends from the caller's
 * pages and reports on the socket's error queue when it no longer needs
 * them (a range of send ids, one id per sendmsg call that queued data, in
 * the order of the calls). Loopback and veth deliver by copying the pages
 * at the receiver anyway; the report then carries "copied"
 * (SO_EE_CODE_ZEROCOPY_COPIED), which is what this machine shows.
 *
 * Threads: the state belongs to the one thread sending on the socket.
 */
#ifndef GW_NET_ZEROCOPY_H
#define GW_NET_ZEROCOPY_H

#include <stdbool.h>
#include <stdint.h>

struct gw_zc {
	uint32_t sent;			/* ids handed out so far (sendmsg calls with data) */
	uint32_t done;			/* ids below this are complete */
	uint64_t ahead;			/* bit i: id done + 1 + i complete already */
	uint64_t completed, copied;	/* ids completed; of those, copied by the kernel */
};

/* Turn SO_ZEROCOPY on. 0 or -errno (-EOPNOTSUPP: not a TCP socket or too old). */
int gw_zc_enable(int fd);
/*
 * Read the completions queued on @fd, waiting up to @timeout_ms (0: no
 * wait, -1: until one arrives) for the first. 0, or -errno (-ETIMEDOUT
 * when nothing came within a positive timeout).
 */
int gw_zc_reap(struct gw_zc *z, int fd, int timeout_ms);
/* Record one completion range [@lo, @hi] (what gw_zc_reap parsed); exposed for tests. */
void gw_zc_complete(struct gw_zc *z, uint32_t lo, uint32_t hi, bool copied);

#endif
