/* SPDX-License-Identifier: MIT */
/*
 * Device state as a list of named, versioned sections (include/godwit/vm.h).
 * Owned by one thread at a time (the migration thread); not locked.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/log.h>
#include "util/state.h"

void gw_state_init(struct gw_state *st)
{
	memset(st, 0, sizeof(*st));
}

void gw_state_release(struct gw_state *st)
{
	for (unsigned i = 0; i < st->nr_sections; i++)
		free(st->sections[i].data);
	gw_state_init(st);
}

int gw_state_add(struct gw_state *st, const char *name, uint32_t version,
		 const void *data, size_t len_bytes)
{
	struct gw_section *sec;
	size_t name_len;

	if (!st || !name || (!data && len_bytes))
		return -EINVAL;
	name_len = strlen(name);
	if (name_len == 0 || name_len >= GW_SECTION_NAME_MAX)
		return -EINVAL;
	if (st->nr_sections >= GW_STATE_MAX_SECTIONS)
		return -E2BIG;
	if (len_bytes > GW_STATE_MAX_BYTES - st->total_bytes)
		return -E2BIG;
	if (gw_state_find(st, name, NULL, NULL))
		return -EEXIST;
	sec = &st->sections[st->nr_sections];
	sec->data = malloc(len_bytes ? len_bytes : 1);
	if (!sec->data)
		return -ENOMEM;
	if (len_bytes)
		memcpy(sec->data, data, len_bytes);
	memcpy(sec->name, name, name_len + 1);
	sec->version = version;
	sec->len_bytes = len_bytes;
	st->total_bytes += len_bytes;
	st->nr_sections++;
	return 0;
}

const void *gw_state_find(const struct gw_state *st, const char *name,
			  uint32_t *version, size_t *len_bytes)
{
	for (unsigned i = 0; st && name && i < st->nr_sections; i++) {
		const struct gw_section *sec = &st->sections[i];

		if (strcmp(sec->name, name))
			continue;
		if (version)
			*version = sec->version;
		if (len_bytes)
			*len_bytes = sec->len_bytes;
		return sec->data;
	}
	return NULL;
}

unsigned gw_state_count(const struct gw_state *st)
{
	return st ? st->nr_sections : 0;
}

int gw_state_reject(struct gw_state *st, int err, const char *fmt, ...)
{
	va_list ap;

	if (st && !st->reject_reason[0]) {
		char raw[sizeof(st->reject_reason)];

		va_start(ap, fmt);
		vsnprintf(raw, sizeof(raw), fmt, ap);
		va_end(ap);
		/* A VMM's refusal quotes the source's section names and specs: escaped as a peer's. */
		gw_log_str(st->reject_reason, sizeof(st->reject_reason), raw);
	}
	return err;
}
