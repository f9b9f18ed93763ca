/* SPDX-License-Identifier: MIT */
/*
 * The engine's statistics as the JSON object of docs/api.md (the API's
 * query-migrate and status answers, `godwit status --json`).
 */
#ifndef GW_CLI_STATS_JSON_H
#define GW_CLI_STATS_JSON_H

#include <jansson.h>
#include <godwit/godwit.h>

/*
 * @st (gw_session_stats of @s) as one new JSON object, a reference the
 * caller owns; the round, channel and vCPU tables are read from @s (NULL:
 * no session, the tables are empty). NULL when out of memory.
 */
json_t *stats_json(struct gw_session *s, const struct gw_stats *st);

#endif
