/* SPDX-License-Identifier: MIT */
/* The parameter set (params.h): filled, counted, applied, written as API words. */
#include "common/params.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_params_put(struct cli_params *ps, enum gw_param p, int64_t value)
{
	unsigned i;

	for (i = 0; i < ps->nr; i++) {
		if (ps->v[i].p == p) {
			ps->v[i].value = value;
			return 0;
		}
	}
	if (ps->nr == CLI_SETS_MAX)
		return -E2BIG;
	ps->v[ps->nr].p = p;
	ps->v[ps->nr].value = value;
	ps->nr++;
	return 0;
}

int64_t cli_params_value(const struct cli_params *ps, enum gw_param p, int64_t def)
{
	for (unsigned i = 0; i < ps->nr; i++)
		if (ps->v[i].p == p)
			return ps->v[i].value;
	return def;
}

int cli_params_put_str(struct cli_params *ps, enum gw_str_param p, const char *value)
{
	if ((unsigned)p >= GW_SPARAM__COUNT || strlen(value) >= sizeof(ps->str[p]) || strpbrk(value, " \t\r\n"))
		return -EINVAL;
	snprintf(ps->str[p], sizeof(ps->str[p]), "%s", value);
	ps->str_set[p] = true;
	return 0;
}

unsigned cli_params_count(const struct cli_params *ps)
{
	unsigned n = ps->nr;

	for (unsigned i = 0; i < GW_SPARAM__COUNT; i++)
		n += ps->str_set[i];
	return n;
}

int cli_params_apply(const struct cli_params *ps, struct gw_session *s, char *err, size_t err_len)
{
	int ret;

	for (unsigned i = 0; i < ps->nr; i++) {
		ret = gw_session_set(s, ps->v[i].p, ps->v[i].value);
		if (ret) {
			snprintf(err, err_len, "%s=%" PRId64 ": %s", gw_param_info(ps->v[i].p)->name,
				 ps->v[i].value, strerror(-ret));
			return ret;
		}
	}
	for (unsigned i = 0; i < GW_SPARAM__COUNT; i++) {
		if (!ps->str_set[i])
			continue;
		ret = gw_session_set_str(s, (enum gw_str_param)i, ps->str[i]);
		if (ret) {
			snprintf(err, err_len, "%s=%s: %s", gw_str_param_name((enum gw_str_param)i), ps->str[i],
				 strerror(-ret));
			return ret;
		}
	}
	return 0;
}

char *cli_params_line(const char *cmd, const char *url, const struct cli_params *ps)
{
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	unsigned i;

	if (!f)
		return NULL;
	fputs(cmd, f);
	if (url)
		fprintf(f, " url=%s", url);
	for (i = 0; i < ps->nr; i++)
		fprintf(f, " %s=%" PRId64, gw_param_info(ps->v[i].p)->name, ps->v[i].value);
	for (i = 0; i < GW_SPARAM__COUNT; i++)
		if (ps->str_set[i])
			fprintf(f, " %s=%s", gw_str_param_name((enum gw_str_param)i), ps->str[i]);
	if (fclose(f)) {
		free(line);
		return NULL;
	}
	return line;
}
