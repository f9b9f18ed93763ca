/* SPDX-License-Identifier: MIT */
/*
 * A small JSON reader and writer for the godwit tool: the API answers are
 * one JSON object per line, and the client reads members of them, prints
 * reports from them and re-emits them (demo --json). Numbers keep their
 * original text so re-emitting never loses precision.
 *
 * Not a general-purpose library: input is bounded (depth 64), and the tree
 * is owned by whoever parsed it; nothing is shared between threads.
 */
#ifndef GW_CLI_JSON_H
#define GW_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum json_type {
	JSON_NULL = 0,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json {
	enum json_type type;
	char *key;		/* member name inside an object, else NULL */
	char *str;		/* JSON_STRING: decoded UTF-8; JSON_NUMBER: its text */
	double number;		/* JSON_NUMBER */
	bool boolean;		/* JSON_BOOL */
	struct json *child;	/* ARRAY/OBJECT: first element or member */
	struct json *next;	/* next sibling */
};

/* Parse one JSON value (surrounding whitespace allowed). NULL + @err on error. */
struct json *json_parse(const char *text, char *err, size_t err_len);
void json_free(struct json *v);

/* Member @key of object @obj, or NULL (also when @obj is not an object). */
const struct json *json_get(const struct json *obj, const char *key);
/* Dotted path through objects: "ram.transferred". */
const struct json *json_path(const struct json *root, const char *path);

/* Typed accessors: return @def when the value is absent or of another type. */
double json_num(const struct json *v, double def);
const char *json_str(const struct json *v, const char *def);
bool json_bool(const struct json *v, bool def);
/* Shorthands on a path. */
double json_path_num(const struct json *root, const char *path, double def);
const char *json_path_str(const struct json *root, const char *path, const char *def);

/* Write @v compactly (no newline). */
void json_write(FILE *out, const struct json *v);
/*
 * Write the members of object @obj (without braces), skipping the keys in
 * NULL-terminated @skip; returns how many were written, so the caller knows
 * whether a separating comma is needed before more members.
 */
unsigned json_write_members(FILE *out, const struct json *obj, const char *const *skip);
/* Write @s as a JSON string literal, escaped. */
void json_write_string(FILE *out, const char *s);

#endif
