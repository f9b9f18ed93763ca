/* SPDX-License-Identifier: MIT */
/* Shared by net/io.c and net/io_tls.c only. */
#ifndef GW_NET_IO_INT_H
#define GW_NET_IO_INT_H

#include <stdint.h>
#include <sys/uio.h>
#include "net/io.h"

/* Now + @ms in ns, 0 (no deadline) for 0. */
uint64_t gw_conn_deadline_after(uint64_t ms);
/* Wait for @events on @fd until @deadline_ns (0: none). 0, -ETIMEDOUT, -errno. */
int gw_conn_wait_fd(const struct gw_sock_ops *sock, int fd, short events, uint64_t deadline_ns);
/* TLS: the iovec as full records, by @deadline_ns. send_lock held. */
int gw_conn_send_tls(struct gw_conn *c, const struct iovec *iov, int iovcnt, uint64_t deadline_ns);
/* TLS: read exactly the iovec by the frame's deadline. Receiving thread. */
int gw_conn_recv_tls(struct gw_conn *c, const struct iovec *iov, int iovcnt);

#endif
