/* SPDX-License-Identifier: MIT */
/* The explicit transport table. */
#include <stddef.h>
#include "net/transport.h"

extern const struct gw_transport_ops gw_transport_tcp;
extern const struct gw_transport_ops gw_transport_unix;
extern const struct gw_transport_ops gw_transport_rdma;

const struct gw_transport_ops *const gw_transports[] = {
	&gw_transport_tcp,
	&gw_transport_unix,
	&gw_transport_rdma,
	NULL,
};
