/* SPDX-License-Identifier: MIT */
/* Shared by the harnesses. */
#include <godwit/log.h>
#include "fuzz.h"

static void drop(void *opaque, enum gw_log_level level, const char *line)
{
	(void)opaque, (void)level, (void)line;
}

void fuzz_quiet_log(void)
{
	if (!getenv("GW_FUZZ_VERBOSE"))
		gw_log_set_sink(drop, NULL);
}
