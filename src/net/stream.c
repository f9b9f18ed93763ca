/* SPDX-License-Identifier: MIT */
/* The explicit table of streams (see stream.h). */
#include <stddef.h>
#include "net/stream.h"

const struct gw_stream_ops *const gw_streams[] = {
	&gw_stream_plain,
	&gw_stream_tls,
	NULL,
};
