/* SPDX-License-Identifier: MIT */
/*
 * A TCP relay for tests: listens on 127.0.0.1 (port chosen by the kernel)
 * and forwards every connection to a target, both ways, until cut. A cut
 * closes every forwarded connection with a reset (SO_LINGER 0), as a
 * broken link looks to both ends; connections made after a cut of every
 * connection are refused the same way.
 *
 * A cut can be placed by the stream itself (relay_cut_at): the relay reads
 * the godwit frames the source sends and cuts at a point of postcopy's
 * progress, whatever the speed of the machine or of the test's thread.
 *
 * Threads: one forwarding thread per relay; the scan of the frames and the
 * armed cut belong to it. relay_cut, relay_cut_at and the counters may be
 * called from any thread.
 */
#ifndef GW_TEST_RELAY_H
#define GW_TEST_RELAY_H

#include <stdbool.h>
#include <stdint.h>

struct relay;

/* A relay to 127.0.0.1:@target_port, or NULL. */
struct relay *relay_start(uint16_t target_port);
/* Its URL: "tcp:127.0.0.1:PORT". */
const char *relay_url(const struct relay *r);
/* Connections accepted so far. */
unsigned relay_conns(struct relay *r);
/* Cut every connection (@only < 0), or only the @only-th accepted one. */
void relay_cut(struct relay *r, int only);
/*
 * Arm a cut made in the stream, before postcopy can complete (plain TCP
 * godwit frames only; call before the migration starts). The relay adds up
 * the pages named in the source's PC_DIRTY maps (the postcopy set, which
 * the source sends before COMPLETE) and counts the entries of every PAGES
 * frame the source sends after the first PC_DIRTY (pushes and answers: the
 * destination applied every precopy page before PC_PREPARED, and the
 * source sends none of these before RESUMED). Inside the frame that would
 * bring the count to @pct % of the set (at least 1 page), after its
 * header and entry count, it cuts as relay_cut(@only) does (@only taken
 * modulo the connections accepted by then). Fewer pages than the set went
 * through, so the destination cannot have placed them all.
 * A cut of one connection also stops the source's bytes on the others
 * (read and dropped; what the destination sends still goes through), so
 * the remaining pages cannot arrive while the ends notice the cut: both
 * must pause on the connection that broke.
 */
void relay_cut_at(struct relay *r, int only, unsigned pct);
/*
 * Whether the armed cut was made; *@pages: PAGES entries that went through
 * before it, *@set_pages: the postcopy set's pages (either may be NULL).
 */
bool relay_cut_made(struct relay *r, uint64_t *pages, uint64_t *set_pages);
void relay_stop(struct relay *r);

#endif
