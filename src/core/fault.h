/* SPDX-License-Identifier: MIT */
/*
 * Fault injection, compiled only into test builds (GW_FAULT_INJECTION, the
 * gw_engine_fi library behind tests/godwit-fi): the release library holds
 * none of it, and its public headers know nothing about it.
 *
 * A test arms one fault point per process with the environment variable
 *   GW_FAULT=NAME[:ARG]        e.g. GW_FAULT=dst-round0:12582912
 * read when a session is created. Names and arguments (gw_fault_names[]):
 *   dst-round0       ARG bytes of pages received in round 0: die
 *   dst-round-n      round ARG (>= 1) starts: die
 *   dst-final        final pages received, before READY: die
 *   dst-after-ready  READY sent, before GO: die
 *   dst-after-go     GO received, before the VM resumes: die
 *   dst-bad-frame    answer HELLO with a frame whose header is garbage
 *   dst-refuse-state refuse the device state with a reason
 *   dst-stall        round ARG starts: stop reading until the session fails
 *   src-corrupt      the ARG-th page batch leaves with a payload its CRC misses
 *   src-delay-go     wait ARG ms between READY and GO
 *   dst-corrupt-page change a byte of the first page this migration wrote
 *                    (local: of the last block), just before resume
 *                    (verification, or local the guest's check, must catch it)
 *   src-pc-cut       postcopy: once ARG pages were pushed, cut every connection
 *   dst-pc-cut       postcopy: once ARG pages were placed, cut every connection
 *                    (as a broken link would: both sides pause for a recovery)
 *   dst-slow         sleep ARG us before each PAGES frame is read (a
 *                    destination slower than the link: data piles up in the
 *                    socket buffers)
 * "die" is raise(SIGKILL): the process vanishes as with kill -9.
 */
#ifndef GW_FAULT_H
#define GW_FAULT_H

#include <stdbool.h>
#include <stdint.h>

struct gw_session;

enum gw_fault_point {
	GW_FAULT_NONE = 0,
	GW_FAULT_DST_ROUND0,
	GW_FAULT_DST_ROUND_N,
	GW_FAULT_DST_FINAL,
	GW_FAULT_DST_AFTER_READY,
	GW_FAULT_DST_AFTER_GO,
	GW_FAULT_DST_BAD_FRAME,
	GW_FAULT_DST_REFUSE_STATE,
	GW_FAULT_DST_STALL,
	GW_FAULT_SRC_CORRUPT,
	GW_FAULT_SRC_DELAY_GO,
	GW_FAULT_DST_CORRUPT_PAGE,
	GW_FAULT_SRC_PC_CUT,
	GW_FAULT_DST_PC_CUT,
	GW_FAULT_DST_SLOW,
	GW_FAULT__COUNT
};

/*
 * Fault points, one line each at their site, nothing at all in a release
 * build (the arguments are not even evaluated). @v is what the point's
 * argument is compared with, by the point's rule (fault.c, gw_faults[]):
 * bytes received, a round, a frame or page count, or 0 for a point that
 * always fires once reached.
 *
 *   GW_FAULT_POINT(s, point, v)     the point acts by itself (die, stall, sleep)
 *   GW_FAULT_DUE(s, point, v)       true when it fires: the site acts (refuse,
 *                                   cut, corrupt, send garbage)
 *   GW_FAULT_CORRUPT_NEXT(s, conn, nth)  src-corrupt: the next payload sent on
 *                                   @conn leaves with a bit its CRC misses, when
 *                                   @nth (the frame's number on the channel,
 *                                   0 = a frame without data) is the argument
 *
 * The sites include core/session_int.h: the armed point is a session field.
 */
#ifdef GW_FAULT_INJECTION
/* Arm from GW_FAULT (session creation). Unknown names are logged and ignored. */
void gw_fault_init(struct gw_session *s);
/* @point is armed and reached with @v: true if its rule says it fires (after its action, if any). */
bool gw_fault_fire(struct gw_session *s, enum gw_fault_point point, uint64_t v);
#define GW_FAULT_DUE(s, point, v) \
	(__builtin_expect((s)->fault_point == (point), 0) && gw_fault_fire((s), (point), (v)))
#define GW_FAULT_CORRUPT_NEXT(s, conn, nth) \
	do { if (GW_FAULT_DUE(s, GW_FAULT_SRC_CORRUPT, nth)) (conn)->fault_corrupt_next = true; } while (0)
#else
static inline void gw_fault_init(struct gw_session *s) { (void)s; }
#define GW_FAULT_DUE(s, point, v) (false && ((void)(s), (void)(point), (void)(v), true))
#define GW_FAULT_CORRUPT_NEXT(s, conn, nth) ((void)(false && ((void)(s), (void)(conn), (void)(nth), true)))
#endif
#define GW_FAULT_POINT(s, point, v) ((void)GW_FAULT_DUE(s, point, v))

#endif
