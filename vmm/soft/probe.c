/* SPDX-License-Identifier: MIT */
/*
 * Whether the soft backend is usable here. Its RAM is plain shared memory,
 * which the engine tracks with userfaultfd asynchronous write-protect and
 * harvests with PAGEMAP_SCAN (Linux >= 6.7): without a dirty-tracking
 * backend for plain memory a soft VM could run but never migrate. The
 * engine answers (gw_dirty_probe).
 */
#include <stdio.h>
#include <godwit/godwit.h>
#include "soft/soft_internal.h"

int soft_probe(char *why, size_t why_len)
{
	char backend[96];
	int ret = gw_dirty_probe(GW_DIRTY_AUTO, NULL, backend, sizeof(backend));

	if (ret)
		snprintf(why, why_len, "no dirty tracking for plain memory here (%s)", backend);
	else
		snprintf(why, why_len, "dirty tracking by %s", backend);
	return ret;
}
