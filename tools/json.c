/* SPDX-License-Identifier: MIT */
/* Small JSON reader/writer for the godwit tool (see json.h). RFC 8259 grammar. */
#include "json.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JSON_DEPTH_MAX 64

struct parser {
	const char *p;
	const char *start;
	char *err;
	size_t err_len;
	bool failed;
};

static void perr(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void perr(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ps->failed)
		return;
	ps->failed = true;
	if (!ps->err || !ps->err_len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(ps->err, ps->err_len, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < ps->err_len)
		snprintf(ps->err + n, ps->err_len - (size_t)n, " at offset %td",
			 ps->p - ps->start);
}

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		int c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote. The decoded string is never longer than its source. */
static char *parse_string(struct parser *ps)
{
	const char *p = ps->p + 1, *q;
	char *out, *o;

	for (q = p; *q && *q != '"'; q++)
		if (*q == '\\' && q[1])
			q++;
	if (*q != '"') {
		perr(ps, "unterminated string");
		return NULL;
	}
	out = malloc((size_t)(q - p) + 1);
	if (!out) {
		perr(ps, "out of memory");
		return NULL;
	}
	for (o = out; p < q; p++) {
		unsigned cp, lo;

		if ((unsigned char)*p < 0x20) {
			ps->p = p;
			perr(ps, "control character in string");
			goto fail;
		}
		if (*p != '\\') {
			*o++ = *p;
			continue;
		}
		p++;
		switch (*p) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (q - p < 5 || hex4(p + 1, &cp)) {
				ps->p = p;
				perr(ps, "bad \\u escape");
				goto fail;
			}
			p += 4;
			/* A surrogate pair is 12 source bytes for 4 output bytes. */
			if (cp >= 0xd800 && cp < 0xdc00 && q - p >= 7 && p[1] == '\\' &&
			    p[2] == 'u' && !hex4(p + 3, &lo) && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			} else if (cp >= 0xd800 && cp < 0xe000) {
				cp = 0xfffd;	/* lone surrogate */
			}
			o += put_utf8(o, cp);
			break;
		default:
			ps->p = p;
			perr(ps, "bad escape");
			goto fail;
		}
	}
	*o = '\0';
	ps->p = q + 1;
	return out;
fail:
	free(out);
	return NULL;
}

static bool parse_number(struct parser *ps, struct json *v)
{
	const char *p = ps->p, *s = p;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (isdigit((unsigned char)*p))
		while (isdigit((unsigned char)*p))
			p++;
	else
		goto bad;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			goto bad;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			goto bad;
		while (isdigit((unsigned char)*p))
			p++;
	}
	v->str = strndup(s, (size_t)(p - s));
	if (!v->str) {
		perr(ps, "out of memory");
		return false;
	}
	v->number = strtod(v->str, NULL);
	ps->p = p;
	return true;
bad:
	perr(ps, "bad number");
	return false;
}

static struct json *parse_value(struct parser *ps, int depth);

static bool parse_container(struct parser *ps, struct json *v, int depth)
{
	char close = v->type == JSON_OBJECT ? '}' : ']';
	struct json **tail = &v->child;

	ps->p++;
	skip_ws(ps);
	if (*ps->p == close) {
		ps->p++;
		return true;
	}
	for (;;) {
		char *key = NULL;
		struct json *m;

		skip_ws(ps);
		if (v->type == JSON_OBJECT) {
			if (*ps->p != '"') {
				perr(ps, "expected member name");
				return false;
			}
			key = parse_string(ps);
			if (!key)
				return false;
			skip_ws(ps);
			if (*ps->p != ':') {
				free(key);
				perr(ps, "expected ':'");
				return false;
			}
			ps->p++;
		}
		m = parse_value(ps, depth + 1);
		if (!m) {
			free(key);
			return false;
		}
		m->key = key;
		*tail = m;
		tail = &m->next;
		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			return true;
		}
		perr(ps, "expected ',' or '%c'", close);
		return false;
	}
}

static struct json *parse_value(struct parser *ps, int depth)
{
	struct json *v;
	bool ok = true;

	if (depth > JSON_DEPTH_MAX) {
		perr(ps, "nested too deeply");
		return NULL;
	}
	skip_ws(ps);
	v = calloc(1, sizeof(*v));
	if (!v) {
		perr(ps, "out of memory");
		return NULL;
	}
	switch (*ps->p) {
	case '{':
		v->type = JSON_OBJECT;
		ok = parse_container(ps, v, depth);
		break;
	case '[':
		v->type = JSON_ARRAY;
		ok = parse_container(ps, v, depth);
		break;
	case '"':
		v->type = JSON_STRING;
		v->str = parse_string(ps);
		ok = v->str != NULL;
		break;
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(ps->p, "true", 4)) {
			v->type = JSON_BOOL;
			v->boolean = true;
			ps->p += 4;
		} else if (!strncmp(ps->p, "false", 5)) {
			v->type = JSON_BOOL;
			ps->p += 5;
		} else if (!strncmp(ps->p, "null", 4)) {
			v->type = JSON_NULL;
			ps->p += 4;
		} else {
			perr(ps, "unexpected token");
			ok = false;
		}
		break;
	default:
		v->type = JSON_NUMBER;
		ok = parse_number(ps, v);
		break;
	}
	if (!ok) {
		json_free(v);
		return NULL;
	}
	return v;
}

struct json *json_parse(const char *text, char *err, size_t err_len)
{
	struct parser ps = { .p = text, .start = text, .err = err, .err_len = err_len };
	struct json *v;

	if (!text) {
		perr(&ps, "no input");
		return NULL;
	}
	v = parse_value(&ps, 0);
	if (!v)
		return NULL;
	skip_ws(&ps);
	if (*ps.p) {
		perr(&ps, "trailing characters");
		json_free(v);
		return NULL;
	}
	return v;
}

void json_free(struct json *v)
{
	while (v) {
		struct json *next = v->next;

		json_free(v->child);
		free(v->key);
		free(v->str);
		free(v);
		v = next;
	}
}

const struct json *json_get(const struct json *obj, const char *key)
{
	const struct json *m;

	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	for (m = obj->child; m; m = m->next)
		if (!strcmp(m->key, key))
			return m;
	return NULL;
}

const struct json *json_path(const struct json *root, const char *path)
{
	char part[128];
	const char *dot;

	while (root && path) {
		size_t n;

		dot = strchr(path, '.');
		n = dot ? (size_t)(dot - path) : strlen(path);
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		root = json_get(root, part);
		path = dot ? dot + 1 : NULL;
	}
	return root;
}

double json_num(const struct json *v, double def)
{
	return v && v->type == JSON_NUMBER ? v->number : def;
}

const char *json_str(const struct json *v, const char *def)
{
	return v && v->type == JSON_STRING ? v->str : def;
}

bool json_bool(const struct json *v, bool def)
{
	return v && v->type == JSON_BOOL ? v->boolean : def;
}

double json_path_num(const struct json *root, const char *path, double def)
{
	return json_num(json_path(root, path), def);
}

const char *json_path_str(const struct json *root, const char *path, const char *def)
{
	return json_str(json_path(root, path), def);
}

void json_write_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', out);
	for (; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		default:
			if (*p < 0x20)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
		}
	}
	fputc('"', out);
}

void json_write(FILE *out, const struct json *v)
{
	const struct json *m;

	if (!v) {
		fputs("null", out);
		return;
	}
	switch (v->type) {
	case JSON_NULL: fputs("null", out); break;
	case JSON_BOOL: fputs(v->boolean ? "true" : "false", out); break;
	case JSON_NUMBER: fputs(v->str, out); break;
	case JSON_STRING: json_write_string(out, v->str); break;
	case JSON_ARRAY:
		fputc('[', out);
		for (m = v->child; m; m = m->next) {
			json_write(out, m);
			if (m->next)
				fputc(',', out);
		}
		fputc(']', out);
		break;
	case JSON_OBJECT:
		fputc('{', out);
		json_write_members(out, v, NULL);
		fputc('}', out);
		break;
	}
}

unsigned json_write_members(FILE *out, const struct json *obj, const char *const *skip)
{
	const struct json *m;
	unsigned n = 0;

	if (!obj || obj->type != JSON_OBJECT)
		return 0;
	for (m = obj->child; m; m = m->next) {
		const char *const *k;
		bool skipped = false;

		for (k = skip; k && *k; k++)
			if (!strcmp(*k, m->key))
				skipped = true;
		if (skipped)
			continue;
		if (n++)
			fputc(',', out);
		json_write_string(out, m->key);
		fputc(':', out);
		json_write(out, m);
	}
	return n;
}
