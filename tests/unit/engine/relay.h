/* SPDX-License-Identifier: MIT */
/*
 * A TCP relay for tests: listens on 127.0.0.1 (port chosen by the kernel)
 * and forwards every connection to a target, both ways, until cut. A cut
 * closes every forwarded connection with a reset (SO_LINGER 0), as a
 * broken link looks to both ends; connections made after a cut are
 * refused the same way.
 *
 * Threads: one forwarding thread per relay; relay_cut and the counters may
 * be called from any thread.
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
void relay_stop(struct relay *r);

#endif
