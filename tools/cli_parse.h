/* SPDX-License-Identifier: MIT */
/*
 * Command-line value parsing for the godwit tool: sizes, rates, durations,
 * PARAM=VALUE assignments and codec specs. Every parser rejects trailing
 * junk, negative values where none make sense, and overflow, and returns
 * 0 or -EINVAL / -ERANGE without printing anything: the caller words the
 * error because only it knows which option the value belonged to.
 */
#ifndef GW_CLI_PARSE_H
#define GW_CLI_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/params.h>

/*
 * A size in bytes: "4096", "512K", "1G", "1.5G", "64MiB", "2gb", "100B".
 * Suffixes K, M, G, T (any case, optionally followed by "i" and/or "B") are
 * powers of 1024. A fraction is allowed with a suffix and rounds down to a
 * whole byte. 0, -EINVAL (syntax), -ERANGE (does not fit in 64 bits).
 */
int cli_parse_size(const char *s, uint64_t *out_bytes);

/* A rate in bytes per second: a size, optionally followed by "/s". */
int cli_parse_rate(const char *s, uint64_t *out_bps);

/*
 * A duration: a decimal number (fraction allowed) with an optional unit
 * "ns", "us", "ms" or "s"; without a unit it is in @default_unit_ns
 * (e.g. 1000000 for milliseconds). Result in nanoseconds, rounded down.
 */
int cli_parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *out_ns);

/* A plain decimal integer within [min, max]: 0, -EINVAL, -ERANGE. */
int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

/*
 * A codec spec "ALG" or "ALG:LEVEL" ("zstd", "zstd:3", "lz4", "none",
 * "auto"). *level is 0 (codec default) when no level is given.
 * 0, -ENOENT (unknown codec), -EINVAL (syntax).
 */
int cli_parse_codec(const char *spec, enum gw_codec_id *codec, int64_t *level);

/*
 * The value of parameter @p. Besides integers (size suffixes allowed, e.g.
 * max-bandwidth-bps=100M) it accepts names where the parameter is an enum:
 * compress=zstd, dirty-backend=uffd-wp, converge-policy=force, and
 * yes/no/on/off/true/false for local and verify. The result is checked
 * against the parameter's bounds. 0, -EINVAL (syntax), -ERANGE (bounds).
 * @err (may be NULL) receives a one-line reason.
 */
int cli_parse_param_value(enum gw_param p, const char *s, int64_t *value,
			  char *err, size_t err_len);

/*
 * "PARAM=VALUE" with PARAM a name of the parameter table
 * (gw_param_info()->name). 0, -ENOENT (unknown parameter), -EINVAL, -ERANGE;
 * @err receives a one-line reason.
 */
int cli_parse_param(const char *assign, enum gw_param *p, int64_t *value,
		    char *err, size_t err_len);

/* Human-readable byte count into @buf ("1.50 GiB", "512 B"); returns @buf. */
const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif
