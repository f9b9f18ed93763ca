/* SPDX-License-Identifier: MIT */
/*
 * The engine's statistics as the JSON object of docs/api.md (the API's
 * query-migrate and status answers, `godwit status --json`).
 */
#ifndef GW_CLI_STATS_JSON_H
#define GW_CLI_STATS_JSON_H

#include <jansson.h>
#include <godwit/godwit.h>

/* @st as one new JSON object (a reference the caller owns), NULL when out of memory. */
json_t *stats_json(const struct gw_stats *st);

#endif
