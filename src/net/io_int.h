/* SPDX-License-Identifier: MIT */
/* Shared by net/io.c, net/io_tls.c and the streams (net/stream_*.c) only. */
#ifndef GW_NET_IO_INT_H
#define GW_NET_IO_INT_H

#include <stdint.h>
#include <sys/uio.h>
#include "net/io.h"

/* Now + @ms in ns, 0 (no deadline) for 0. */
uint64_t gw_conn_deadline_after(uint64_t ms);
/* Wait for @events on @fd until @deadline_ns (0: none). 0, -ETIMEDOUT, -errno. */
int gw_conn_wait_fd(const struct gw_sock_ops *sock, int fd, short events, uint64_t deadline_ns);
/* Milliseconds left until @deadline_ns (0: none = -1 for poll), at least 1 while not passed. */
int gw_conn_ms_left(uint64_t deadline_ns);
/*
 * SO_RCVTIMEO or SO_SNDTIMEO (@opt) to @ms (0: none) through the stream
 * (a no-op on a non-blocking one), under fd_lock. 0, -EBADF (closed), -errno.
 */
int gw_conn_sock_timeout(struct gw_conn *c, int opt, uint64_t ms);

#endif
