/* SPDX-License-Identifier: MIT */
/*
 * The control socket of a running godwit VM (docs/api.md).
 *
 * A UNIX stream socket, mode 0600. One request per connection: the client
 * sends one line "COMMAND key=value ...\n" (at most API_LINE_MAX bytes,
 * values without spaces), the server answers one line of JSON,
 * {"ok":true,...} or {"ok":false,"error":"..."}, and closes.
 *
 * Threads: the server runs its own thread, which alone calls the handler,
 * one request at a time; api_server_stop() is called by the thread that
 * started it.
 */
#ifndef GW_CLI_API_H
#define GW_CLI_API_H

#include <stddef.h>
#include <stdio.h>

#define API_LINE_MAX 4096	/* request line, newline included */
#define API_ARGS_MAX 64		/* key=value pairs per request */
#define API_IO_TIMEOUT_MS 5000	/* a client silent this long is dropped */

struct api_arg {
	const char *key;
	const char *value;
};

struct api_request {
	const char *cmd;
	unsigned nr_args;
	struct api_arg args[API_ARGS_MAX];
};

/*
 * Split @line (modified in place: words are NUL-terminated inside it) into
 * a command and key=value pairs. 0, or -EINVAL with a reason in @err.
 */
int api_parse_request(char *line, struct api_request *req, char *err, size_t err_len);
/* Value of @key in @req, or NULL. */
const char *api_arg(const struct api_request *req, const char *key);

/*
 * Handles one request: writes exactly one JSON object (no newline) to @out.
 * Runs on the server thread.
 */
typedef void (*api_handler_fn)(void *opaque, const struct api_request *req, FILE *out);

struct api_server;

/*
 * Listen on @path (a stale socket there is removed; a live one, or any
 * other kind of file, is an error) and serve in a new thread.
 * NULL with errno set and a reason in @err.
 */
struct api_server *api_server_start(const char *path, api_handler_fn fn, void *opaque,
				    char *err, size_t err_len);
/* Stop serving, join the thread, remove the socket. NULL is fine. */
void api_server_stop(struct api_server *srv);

/*
 * Client: send @line (without newline) to the server at @path and return
 * its one-line answer in *@reply (malloc'ed, newline stripped).
 * 0, or -errno (-ENOENT / -ECONNREFUSED: nothing serves there,
 * -ETIMEDOUT: no answer within @timeout_ms, -EPROTO: answer malformed).
 */
int api_call(const char *path, const char *line, char **reply, int timeout_ms);

/* Write {"ok":false,"error":"<msg>"} to @out. */
void api_reply_error(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
