/* SPDX-License-Identifier: MIT */
/* Helpers over libjansson for the godwit tool (see json.h). */
#include "common/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

json_t *js_parse(const char *text, size_t len, char *err, size_t err_len)
{
	json_error_t e;
	json_t *v;

	if (!text) {
		snprintf(err, err_len, "no input");
		return NULL;
	}
	/* JSON_DECODE_ANY: a bare value is valid JSON; callers check the type they want. */
	v = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
	if (!v)
		snprintf(err, err_len, "%s at line %d column %d", e.text, e.line, e.column);
	return v;
}

json_t *js_get(const json_t *obj, const char *key)
{
	return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

json_t *js_path(const json_t *root, const char *path)
{
	char part[128];
	json_t *v = (json_t *)root;

	while (v && path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);

		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		v = js_get(v, part);
		path = dot ? dot + 1 : NULL;
	}
	return v;
}

double js_num(const json_t *v, double def)
{
	return json_is_number(v) ? json_number_value(v) : def;
}

const char *js_str(const json_t *v, const char *def)
{
	return json_is_string(v) ? json_string_value(v) : def;
}

bool js_bool(const json_t *v, bool def)
{
	return json_is_boolean(v) ? json_is_true(v) : def;
}

double js_path_num(const json_t *root, const char *path, double def)
{
	return js_num(js_path(root, path), def);
}

const char *js_path_str(const json_t *root, const char *path, const char *def)
{
	return js_str(js_path(root, path), def);
}

/* Length of the valid UTF-8 sequence at @p (at most @left bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	size_t n, i;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n > left)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are invalid. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

json_t *js_string(const char *s)
{
	size_t len, i, n;
	char *copy;
	json_t *v;

	if (!s)
		s = "";
	len = strlen(s);
	v = json_stringn(s, len);
	if (v)
		return v;
	/* Invalid UTF-8 (or out of memory): replace every bad byte. */
	copy = malloc(len + 1);
	if (!copy)
		return NULL;
	for (i = 0; i < len; i += n) {
		n = utf8_len((const unsigned char *)s + i, len - i);
		if (n == 0) {
			copy[i] = '?';
			n = 1;
		} else {
			memcpy(copy + i, s + i, n);
		}
	}
	v = json_stringn(copy, len);
	free(copy);
	return v;
}

static int set_new(json_t *obj, const char *key, json_t *v)
{
	return v && json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}

int js_set_str(json_t *obj, const char *key, const char *s)
{
	return set_new(obj, key, js_string(s));
}

int js_set_int(json_t *obj, const char *key, long long v)
{
	return set_new(obj, key, json_integer(v));
}

int js_set_real(json_t *obj, const char *key, double v)
{
	return set_new(obj, key, json_real(v));
}

int js_set_bool(json_t *obj, const char *key, bool v)
{
	return set_new(obj, key, json_boolean(v));
}

int js_write(FILE *out, const json_t *v)
{
	return json_dumpf(v, out, JS_DUMP_FLAGS | JSON_ENCODE_ANY) ? -EIO : 0;
}

char *js_dumps(const json_t *v)
{
	return json_dumps(v, JS_DUMP_FLAGS | JSON_ENCODE_ANY);
}

json_t *js_copy_without(const json_t *obj, const char *const *skip)
{
	json_t *copy = json_object(), *v;
	const char *key;

	if (!copy || !json_is_object(obj))
		return copy;
	json_object_foreach((json_t *)obj, key, v) {
		const char *const *k;

		for (k = skip; k && *k && strcmp(*k, key); k++)
			;
		if ((!k || !*k) && json_object_set(copy, key, v)) {
			json_decref(copy);
			return NULL;
		}
	}
	return copy;
}
