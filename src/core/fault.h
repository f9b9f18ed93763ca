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

#ifdef GW_FAULT_INJECTION
/* Arm from GW_FAULT (session creation). Unknown names are logged and ignored. */
void gw_fault_init(struct gw_session *s);
/* Armed at @point, and (for points with an argument) its argument. */
bool gw_fault_armed(const struct gw_session *s, enum gw_fault_point point);
uint64_t gw_fault_arg(const struct gw_session *s);
/* If armed at @point: log and die like kill -9. */
void gw_fault_die(struct gw_session *s, enum gw_fault_point point);
/* Stop here until the session fails (a destination that stops reading). */
void gw_fault_stall(struct gw_session *s);
/* Sleep the armed point's argument, in microseconds. */
void gw_fault_sleep_us(const struct gw_session *s);
#define GW_FAULT_ON 1
#else
static inline void gw_fault_init(struct gw_session *s) { (void)s; }
static inline bool gw_fault_armed(const struct gw_session *s, enum gw_fault_point point)
{ (void)s; (void)point; return false; }
static inline uint64_t gw_fault_arg(const struct gw_session *s) { (void)s; return 0; }
static inline void gw_fault_die(struct gw_session *s, enum gw_fault_point point) { (void)s; (void)point; }
static inline void gw_fault_stall(struct gw_session *s) { (void)s; }
static inline void gw_fault_sleep_us(const struct gw_session *s) { (void)s; }
#define GW_FAULT_ON 0
#endif

#endif
