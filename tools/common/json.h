/* SPDX-License-Identifier: MIT */
/*
 * JSON for the godwit tool: Debian's libjansson does the parsing and the
 * writing; these helpers only shorten what the tool does again and again
 * (dotted paths, typed reads with defaults, one dump format).
 *
 * Every value the tool writes goes out with JS_DUMP_FLAGS: compact (no
 * spaces), members in insertion order, reals with 15 significant digits so
 * that milliseconds rounded to the microsecond print as "12.345", not
 * "12.345000000000001".
 *
 * Ownership is jansson's: references, json_decref() to release. Nothing
 * here is shared between threads.
 */
#ifndef GW_CLI_JSON_H
#define GW_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

#define JS_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/*
 * Parse exactly one JSON value of @len bytes (surrounding whitespace
 * allowed; a NUL inside is an error; jansson bounds nesting at 2048).
 * NULL with a one-line reason in @err ("... at line L column C").
 */
json_t *js_parse(const char *text, size_t len, char *err, size_t err_len);

/* Member @key of object @obj, or NULL (also when @obj is not an object). */
json_t *js_get(const json_t *obj, const char *key);
/* Dotted path through objects: "ram.transferred". */
json_t *js_path(const json_t *root, const char *path);

/* Typed reads: @def when absent or of another type; integers and reals are both numbers. */
double js_num(const json_t *v, double def);
const char *js_str(const json_t *v, const char *def);
bool js_bool(const json_t *v, bool def);
double js_path_num(const json_t *root, const char *path, double def);
const char *js_path_str(const json_t *root, const char *path, const char *def);

/*
 * A JSON string of @s, which may be any bytes: invalid UTF-8 is replaced
 * by '?' (jansson refuses it, and a peer's reason or a command-line word may
 * hold some). NULL @s gives "". NULL only when out of memory.
 */
json_t *js_string(const char *s);
/* Object member setters that take a C value; 0 or -ENOMEM. */
int js_set_str(json_t *obj, const char *key, const char *s);
int js_set_int(json_t *obj, const char *key, long long v);
int js_set_real(json_t *obj, const char *key, double v);
int js_set_bool(json_t *obj, const char *key, bool v);

/* Write @v with JS_DUMP_FLAGS (no newline). 0 or -EIO. */
int js_write(FILE *out, const json_t *v);
/* @v as a malloc'ed string with JS_DUMP_FLAGS, NULL when out of memory. */
char *js_dumps(const json_t *v);
/* A shallow copy of object @obj without the members in NULL-terminated @skip. */
json_t *js_copy_without(const json_t *obj, const char *const *skip);

#endif
