/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include "util/errbuf.h"

void gw_errbuf_set(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}
