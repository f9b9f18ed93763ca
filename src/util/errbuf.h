/* SPDX-License-Identifier: MIT */
/* Reasons for the caller: format into a caller's buffer (NULL or 0 length: nothing). */
#ifndef GW_ERRBUF_H
#define GW_ERRBUF_H

#include <stddef.h>

void gw_errbuf_set(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
