/* SPDX-License-Identifier: MIT */
/*
 * A set of parameter settings, the one form both sides use: commands fill
 * it from options (--set, --downtime-limit, ...) and send it as API words
 * (cli_params_line), the running VM fills it from its API and QMP requests
 * and applies it to a session. Not thread-safe: one owner at a time.
 */
#ifndef GW_CLI_PARAMS_H
#define GW_CLI_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/godwit.h>

#define CLI_SETS_MAX 64			/* --set options per command */

struct cli_param {
	enum gw_param p;
	int64_t value;
};

/* A list of parameter settings, later ones win; string parameters (TLS) beside. */
struct cli_params {
	unsigned nr;
	struct cli_param v[CLI_SETS_MAX];
	bool str_set[GW_SPARAM__COUNT];
	char str[GW_SPARAM__COUNT][GW_SPARAM_MAX_BYTES];
};
/* Add or replace; -E2BIG when full. */
int cli_params_put(struct cli_params *ps, enum gw_param p, int64_t value);
/* The value set for @p in @ps, else @def. */
int64_t cli_params_value(const struct cli_params *ps, enum gw_param p, int64_t def);
/* Set a string parameter: -EINVAL when too long or with blanks (API words cannot hold them). */
int cli_params_put_str(struct cli_params *ps, enum gw_str_param p, const char *value);
/* Settings in @ps, integer and string ones. */
unsigned cli_params_count(const struct cli_params *ps);
/* Apply every setting of @ps to @s: 0, or the first refusal with the parameter's name in @err. */
int cli_params_apply(const struct cli_params *ps, struct gw_session *s, char *err, size_t err_len);

/* "CMD [url=URL] name=value ..." for the API (malloc'ed), NULL on ENOMEM. */
char *cli_params_line(const char *cmd, const char *url, const struct cli_params *ps);

#endif
