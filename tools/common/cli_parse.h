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
 * compress=zstd, dirty-backend=uffd-wp, converge-policy=force,
 * dirty-limit-start=start, send-path=live, recv-path=file, and
 * yes/no/on/off/true/false for the boolean ones. The result is checked against the parameter's bounds.
 * 0, -EINVAL (syntax), -ERANGE (bounds). @err receives a one-line reason.
 */
int cli_parse_param_value(enum gw_param p, const char *s, int64_t *value,
			  char *err, size_t err_len);

struct qemu_param;
/*
 * A parameter by godwit's name, or by QEMU's (then *@alias says how its
 * value reads: QEMU's unit, e.g. downtime-limit in ms). 0 or -ENOENT.
 */
int cli_param_lookup(const char *name, enum gw_param *p, const struct qemu_param **alias);
/* " (did you mean 'X'? ...)" for an unknown @name: the nearest name of either kind. */
void cli_param_suggest(const char *name, char *buf, size_t len);

/*
 * NAME and VALUE: NAME godwit's (gw_param_info()->name) or QEMU's
 * (qemu_names.h: the value is then in QEMU's unit and converted). 0,
 * -ENOENT (unknown parameter: @err suggests the nearest name), -EINVAL,
 * -ERANGE; @err receives a one-line reason.
 */
int cli_parse_named_param(const char *name, const char *value, enum gw_param *p,
			  int64_t *out, char *err, size_t err_len);
/* "PARAM=VALUE": cli_parse_named_param on the two halves. */
int cli_parse_param(const char *assign, enum gw_param *p, int64_t *value,
		    char *err, size_t err_len);

/* The name of value @v of an enum or boolean parameter ("zstd", "yes"), or NULL. */
const char *cli_param_value_name(enum gw_param p, int64_t v);
/* "none|zstd|lz4|..." for an enum or boolean parameter, "" for a number. */
void cli_param_value_names(enum gw_param p, char *buf, size_t len);

/* Human-readable byte count into @buf ("1.50 GiB", "512 B"); returns @buf. */
const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif
