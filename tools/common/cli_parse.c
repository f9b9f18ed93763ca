/* SPDX-License-Identifier: MIT */
/*
 * Value parsing for the godwit command line (see cli_parse.h).
 * Arithmetic is done in unsigned __int128 so that "16383.99T" and the like
 * are checked against 64 bits exactly instead of wrapping.
 */
#include "common/cli_parse.h"
#include "common/qemu_names.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define FRAC_DIGITS_MAX 9	/* digits of a fraction kept; more are ignored */

/*
 * A non-negative decimal number at *pp: integer part (at least one digit)
 * and an optional fraction. Advances *pp past it. The fraction is returned
 * as @frac / 10^@frac_digits.
 */
static int parse_decimal(const char **pp, uint64_t *ip, uint64_t *frac,
			 unsigned *frac_digits)
{
	const char *p = *pp;
	unsigned __int128 v = 0;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > UINT64_MAX)
			return -ERANGE;
	}
	*ip = (uint64_t)v;
	*frac = 0;
	*frac_digits = 0;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		for (; isdigit((unsigned char)*p); p++) {
			if (*frac_digits < FRAC_DIGITS_MAX) {
				*frac = *frac * 10 + (unsigned)(*p - '0');
				(*frac_digits)++;
			}
		}
	}
	*pp = p;
	return 0;
}

static uint64_t pow10_u64(unsigned n)
{
	uint64_t r = 1;

	while (n--)
		r *= 10;
	return r;
}

/* ip.frac * mult, rounded down; -ERANGE when it does not fit in 64 bits. */
static int scale(uint64_t ip, uint64_t frac, unsigned frac_digits, uint64_t mult,
		 uint64_t *out)
{
	unsigned __int128 v = (unsigned __int128)ip * mult;

	v += (unsigned __int128)frac * mult / pow10_u64(frac_digits);
	if (v > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

/* Size suffix at @p: K/M/G/T with optional "i" and "B", or "B", or nothing. */
static int size_suffix(const char *p, const char **end, uint64_t *mult)
{
	int shift;

	switch (toupper((unsigned char)*p)) {
	case '\0': *mult = 1; *end = p; return 0;
	case 'B': *mult = 1; *end = p + 1; return 0;
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	default: return -EINVAL;
	}
	p++;
	if (*p == 'i' || *p == 'I')
		p++;
	if (*p == 'b' || *p == 'B')
		p++;
	*mult = UINT64_C(1) << shift;
	*end = p;
	return 0;
}

static int parse_size_at(const char *s, const char **end, uint64_t *out)
{
	uint64_t ip, frac, mult;
	unsigned fd;
	const char *p = s;
	int ret;

	if (!s)
		return -EINVAL;
	ret = parse_decimal(&p, &ip, &frac, &fd);
	if (ret)
		return ret;
	ret = size_suffix(p, &p, &mult);
	if (ret)
		return ret;
	/* "1.5" bytes means nothing: a fraction needs a multiplier. */
	if (fd && mult == 1)
		return -EINVAL;
	ret = scale(ip, frac, fd, mult, out);
	if (ret)
		return ret;
	*end = p;
	return 0;
}

int cli_parse_size(const char *s, uint64_t *out_bytes)
{
	const char *end;
	uint64_t v;
	int ret = parse_size_at(s, &end, &v);

	if (ret)
		return ret;
	if (*end)
		return -EINVAL;
	*out_bytes = v;
	return 0;
}

int cli_parse_rate(const char *s, uint64_t *out_bps)
{
	const char *end;
	uint64_t v;
	int ret = parse_size_at(s, &end, &v);

	if (ret)
		return ret;
	if (*end && strcasecmp(end, "/s") != 0)
		return -EINVAL;
	*out_bps = v;
	return 0;
}

int cli_parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *out_ns)
{
	static const struct { const char *name; uint64_t ns; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
	};
	uint64_t ip, frac, mult = default_unit_ns;
	unsigned fd, i;
	const char *p = s;
	int ret;

	if (!s || !default_unit_ns)
		return -EINVAL;
	ret = parse_decimal(&p, &ip, &frac, &fd);
	if (ret)
		return ret;
	if (*p) {
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcmp(p, units[i].name))
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		mult = units[i].ns;
	}
	return scale(ip, frac, fd, mult, out_ns);
}

int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	const char *p = s;
	bool neg = false;
	uint64_t ip, frac;
	unsigned fd;
	int64_t v;
	int ret;

	if (!s)
		return -EINVAL;
	if (*p == '-') {
		neg = true;
		p++;
	}
	ret = parse_decimal(&p, &ip, &frac, &fd);
	if (ret)
		return ret;
	if (fd || *p)
		return -EINVAL;
	if (neg) {
		if (ip > (uint64_t)INT64_MAX + 1)
			return -ERANGE;
		v = ip == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)ip;
	} else {
		if (ip > (uint64_t)INT64_MAX)
			return -ERANGE;
		v = (int64_t)ip;
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int cli_parse_codec(const char *spec, enum gw_codec_id *codec, int64_t *level)
{
	char name[32];
	const char *colon;
	size_t n;
	int id;

	if (!spec || !*spec)
		return -EINVAL;
	colon = strchr(spec, ':');
	n = colon ? (size_t)(colon - spec) : strlen(spec);
	if (n == 0 || n >= sizeof(name))
		return -EINVAL;
	memcpy(name, spec, n);
	name[n] = '\0';
	id = gw_codec_by_name(name);
	if (id < 0)
		return -ENOENT;
	*level = 0;
	if (colon) {
		/* zstd has negative "fast" levels; the engine checks the bounds. */
		if (cli_parse_int(colon + 1, -1000, 1000, level))
			return -EINVAL;
	}
	*codec = (enum gw_codec_id)id;
	return 0;
}


struct named_value {
	const char *name;
	int64_t value;
};

static const struct named_value bool_names[] = {
	{ "yes", 1 }, { "no", 0 }, { "on", 1 }, { "off", 0 },
	{ "true", 1 }, { "false", 0 }, { NULL, 0 },
};
static const struct named_value dirty_names[] = {
	{ "auto", GW_DIRTY_AUTO }, { "uffd-wp", GW_DIRTY_UFFD_WP },
	{ "kvm-log", GW_DIRTY_KVM_LOG }, { "kvm-ring", GW_DIRTY_KVM_RING }, { NULL, 0 },
};
static const struct named_value policy_names[] = {
	{ "keep-going", GW_CONVERGE_KEEP_GOING }, { "cancel", GW_CONVERGE_CANCEL },
	{ "force", GW_CONVERGE_FORCE }, { NULL, 0 },
};
static const struct named_value dirty_limit_start_names[] = {
	{ "no-converge", GW_DIRTY_LIMIT_ON_NO_CONVERGE }, { "start", GW_DIRTY_LIMIT_FROM_START },
	{ NULL, 0 },
};
static const struct named_value send_path_names[] = {
	{ "auto", GW_SEND_AUTO }, { "copy", GW_SEND_COPY }, { "zerocopy", GW_SEND_ZEROCOPY },
	{ "live", GW_SEND_LIVE }, { "pread", GW_SEND_PREAD }, { NULL, 0 },
};
static const struct named_value recv_path_names[] = {
	{ "auto", GW_RECV_AUTO }, { "file", GW_RECV_FILE }, { NULL, 0 },
};

/*
 * The names an enum or boolean parameter takes, NULL for a number. Every
 * on/off parameter (range 0..1) without names of its own takes yes/no.
 */
static const struct named_value *value_names(enum gw_param p)
{
	const struct gw_param_info *pi = gw_param_info(p);

	switch (p) {
	case GW_PARAM_DIRTY_BACKEND:
		return dirty_names;
	case GW_PARAM_CONVERGE_POLICY:
		return policy_names;
	case GW_PARAM_DIRTY_LIMIT_START:
		return dirty_limit_start_names;
	case GW_PARAM_SEND_PATH:
		return send_path_names;
	case GW_PARAM_RECV_PATH:
		return recv_path_names;
	default:
		return pi && pi->min == 0 && pi->max == 1 ? bool_names : NULL;
	}
}

static bool lookup_name(const struct named_value *t, const char *s, int64_t *v)
{
	for (; t && t->name; t++) {
		if (!strcasecmp(t->name, s)) {
			*v = t->value;
			return true;
		}
	}
	return false;
}

const char *cli_param_value_name(enum gw_param p, int64_t v)
{
	const struct named_value *t = value_names(p);

	if (p == GW_PARAM_COMPRESS)
		return gw_codec_name((enum gw_codec_id)v);
	if (t == bool_names)
		return v == 1 ? "yes" : v == 0 ? "no" : NULL;
	for (; t && t->name; t++)
		if (t->value == v)
			return t->name;
	return NULL;
}

void cli_param_value_names(enum gw_param p, char *buf, size_t len)
{
	const struct named_value *t = value_names(p);
	size_t at = 0;

	buf[0] = '\0';
	if (p == GW_PARAM_COMPRESS) {
		for (int c = 0; c < GW_CODEC__COUNT && at < len; c++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", c ? "|" : "",
					       gw_codec_name((enum gw_codec_id)c));
		return;
	}
	if (t == bool_names) {
		snprintf(buf, len, "yes|no");
		return;
	}
	for (unsigned i = 0; t && t[i].name && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "|" : "", t[i].name);
}

/* "NAME: bad value 'S' (what it takes)": the value names, or a number. -EINVAL. */
static int bad_value(enum gw_param p, const char *pname, const char *s, char *err, size_t err_len)
{
	char names[128];

	cli_param_value_names(p, names, sizeof(names));
	if (names[0])
		snprintf(err, err_len, "%s: bad value '%s' (%s, or its number)", pname, s, names);
	else
		snprintf(err, err_len, "%s: bad value '%s' (an integer; sizes and rates take K/M/G/T)",
			 pname, s);
	return -EINVAL;
}

int cli_parse_param_value(enum gw_param p, const char *s, int64_t *value,
			  char *err, size_t err_len)
{
	const struct gw_param_info *pi = gw_param_info(p);
	const struct named_value *names = value_names(p);
	const char *pname = pi ? pi->name : "?";
	uint64_t u;
	int64_t v;
	int ret;

	if (!pi) {
		snprintf(err, err_len, "unknown parameter %d", (int)p);
		return -EINVAL;
	}
	if (!s || !*s) {
		snprintf(err, err_len, "%s: empty value", pname);
		return -EINVAL;
	}
	if (p == GW_PARAM_COMPRESS && !isdigit((unsigned char)*s)) {
		ret = gw_codec_by_name(s);
		if (ret < 0) {
			snprintf(err, err_len, "%s: unknown codec '%s' (none, zstd, lz4, zlib, isal, auto)",
				 pname, s);
			return -EINVAL;
		}
		v = ret;
	} else if (names && lookup_name(names, s, &v)) {
		/* v set */
	} else if (*s == '-') {
		ret = cli_parse_int(s, INT64_MIN, INT64_MAX, &v);
		if (ret)
			return bad_value(p, pname, s, err, err_len);
	} else {
		/* Any non-negative integer, with a size suffix where one helps. */
		ret = cli_parse_size(s, &u);
		if (ret == -ERANGE || (!ret && u > (uint64_t)INT64_MAX)) {
			snprintf(err, err_len, "%s: value '%s' too large", pname, s);
			return -ERANGE;
		}
		if (ret)
			return bad_value(p, pname, s, err, err_len);
		v = (int64_t)u;
	}
	if (v < pi->min || v > pi->max) {
		snprintf(err, err_len, "%s: %" PRId64 " is out of range: it takes %" PRId64 " to %" PRId64
			 " ('godwit params' lists every parameter's range)", pname, v, pi->min, pi->max);
		return -ERANGE;
	}
	*value = v;
	return 0;
}

int cli_param_lookup(const char *name, enum gw_param *p, const struct qemu_param **alias)
{
	const struct qemu_param *q;

	*alias = NULL;
	if (!gw_param_by_name(name, p))
		return 0;
	q = qemu_param_by_name(name);
	if (!q)
		return -ENOENT;
	*p = q->p;
	*alias = q;
	return 0;
}

void cli_param_suggest(const char *name, char *buf, size_t len)
{
	const char *best = NULL;
	unsigned best_d, cap = strlen(name) / 3 > 2 ? (unsigned)strlen(name) / 3 : 2;

	best_d = cap + 1;
	for (int i = 0; i < GW_PARAM__COUNT; i++) {
		const struct gw_param_info *pi = gw_param_info((enum gw_param)i);
		unsigned d = pi && pi->name ? qemu_edit_distance(name, pi->name, cap) : cap + 1;

		if (d < best_d)
			best_d = d, best = pi->name;
	}
	for (const struct qemu_param *q = qemu_params; q->name; q++) {
		unsigned d = qemu_edit_distance(name, q->name, cap);

		if (d < best_d)
			best_d = d, best = q->name;
	}
	/* A prefix of a name ("downtime") is a near miss too. */
	if (!best) {
		for (int i = 0; i < GW_PARAM__COUNT && !best; i++) {
			const struct gw_param_info *pi = gw_param_info((enum gw_param)i);

			if (pi && pi->name && strlen(name) >= 4 && !strncmp(pi->name, name, strlen(name)))
				best = pi->name;
		}
	}
	if (best)
		snprintf(buf, len, " (did you mean '%s'? 'godwit params' lists them all)", best);
	else
		snprintf(buf, len, " ('godwit params' lists them all)");
}

/* @s in QEMU's unit for @q, into godwit's value (scaled, checked). */
static int parse_alias_value(const struct qemu_param *q, const char *s, int64_t *value,
			     char *err, size_t err_len)
{
	const struct gw_param_info *pi = gw_param_info(q->p);
	uint64_t u;
	int64_t v;
	int ret;

	if (q->kind != QEMU_INT)
		return cli_parse_param_value(q->p, s, value, err, err_len);
	if (!s || !*s || *s == '-') {
		snprintf(err, err_len, "%s: bad value '%s' (%s, at least 0)", q->name, s ? s : "",
			 q->unit[0] ? q->unit : "an integer");
		return -EINVAL;
	}
	ret = strcmp(q->unit, "bytes") && strcmp(q->unit, "bytes/s") ?
	      cli_parse_int(s, 0, INT64_MAX, &v) : cli_parse_size(s, &u);
	if (!ret && (!strcmp(q->unit, "bytes") || !strcmp(q->unit, "bytes/s")))
		v = u > (uint64_t)INT64_MAX ? -1 : (int64_t)u;
	if (ret == -EINVAL || v < 0) {
		snprintf(err, err_len, "%s: bad value '%s' (%s)", q->name, s,
			 q->unit[0] ? q->unit : "an integer");
		return -EINVAL;
	}
	if (ret || (q->scale > 1 && v > INT64_MAX / q->scale) || v * q->scale < pi->min ||
	    v * q->scale > pi->max) {
		int64_t sc = q->scale > 1 ? q->scale : 1;

		snprintf(err, err_len, "%s=%s is out of range: QEMU's %s takes %" PRId64 " to %" PRId64 "%s%s "
			 "(godwit's %s: %" PRId64 " to %" PRId64 ")", q->name, s, q->name,
			 (pi->min + sc - 1) / sc, pi->max / sc, q->unit[0] ? " " : "", q->unit, pi->name,
			 pi->min, pi->max);
		return -ERANGE;
	}
	*value = v * q->scale;
	return 0;
}

int cli_parse_param(const char *assign, enum gw_param *p, int64_t *value,
		    char *err, size_t err_len)
{
	char name[64];
	const char *eq;
	size_t n;

	if (!assign || !(eq = strchr(assign, '='))) {
		snprintf(err, err_len, "'%s': expected PARAM=VALUE", assign ? assign : "");
		return -EINVAL;
	}
	n = (size_t)(eq - assign);
	if (n == 0 || n >= sizeof(name)) {
		snprintf(err, err_len, "'%s': bad parameter name", assign);
		return -EINVAL;
	}
	memcpy(name, assign, n);
	name[n] = '\0';
	return cli_parse_named_param(name, eq + 1, p, value, err, err_len);
}

int cli_parse_named_param(const char *name, const char *s, enum gw_param *p, int64_t *value,
			  char *err, size_t err_len)
{
	const struct qemu_param *alias;
	char hint[128];

	if (cli_param_lookup(name, p, &alias)) {
		cli_param_suggest(name, hint, sizeof(hint));
		snprintf(err, err_len, "unknown parameter '%s'%s", name, hint);
		return -ENOENT;
	}
	if (alias)
		return parse_alias_value(alias, s, value, err, err_len);
	return cli_parse_param_value(*p, s, value, err, err_len);
}

const char *cli_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.2f %s", v, units[u]);
	return buf;
}
