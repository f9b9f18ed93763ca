/* SPDX-License-Identifier: MIT */
/*
 * The control socket of a running godwit VM (docs/api.md).
 *
 * A UNIX stream socket, mode 0600. One request per connection: the client
 * sends one line (at most API_LINE_MAX bytes), either words
 * "COMMAND key=value ..." (values without spaces) or one JSON object
 * {"command":"COMMAND","key":value,...}; the server answers one line of
 * JSON, {"ok":true,...} or {"ok":false,"error":"..."}, and closes. A
 * streaming command (events) answers its first line and keeps the
 * connection, writing one JSON line per event until the client closes.
 *
 * Threads: the server runs its own thread, which alone calls the handler,
 * one request at a time, while it reads every other client's request side
 * by side (up to 16 at once; more evict the one that sent least); a
 * request's whole time, from connect to answer taken, is API_REQUEST_MS.
 * api_server_stop() is called by the thread that started it.
 */
#ifndef GW_CLI_API_H
#define GW_CLI_API_H

#include <stddef.h>
#include <stdio.h>
#include "common/json.h"

#define API_LINE_MAX 4096	/* request line, newline included */
#define API_ARGS_MAX 64		/* key=value pairs per request */
#define API_IO_TIMEOUT_MS 5000	/* a client's send, or a handler's write, waits no longer */
#define API_REQUEST_MS 5000	/* server: a request not read and answered in this time is dropped */

struct api_arg {
	const char *key;
	const char *value;
};

struct api_request {
	const char *cmd;
	unsigned nr_args;
	struct api_arg args[API_ARGS_MAX];
	char text[API_LINE_MAX + 1];	/* where cmd, keys and values point */
};

/*
 * Split @line into a command and key=value pairs (words), or read it as a
 * JSON object whose "command" member is the command and whose other
 * members (strings, numbers, booleans) are the pairs. 0, or -EINVAL with a
 * reason in @err. @req owns copies of everything; @line is not kept.
 */
int api_parse_request(const char *line, struct api_request *req, char *err, size_t err_len);
/* Value of @key in @req, or NULL. */
const char *api_arg(const struct api_request *req, const char *key);

/*
 * Handles one request, on the server thread. Returns the answer (an
 * object; the server writes it as one line and releases it), or NULL when
 * the handler answered on @fd itself and keeps the connection (a stream):
 * from then on the fd is the handler's to write and close.
 */
typedef json_t *(*api_handler_fn)(void *opaque, const struct api_request *req, int fd);

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
/*
 * Client of a stream: connect, send @line, return the connected socket
 * (the caller reads JSON lines from it and closes it), or -errno.
 */
int api_open_stream(const char *path, const char *line);

/* {"ok":false,"error":"<msg>"}; NULL only when out of memory. */
json_t *api_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* {"ok":true} */
json_t *api_ok(void);
/* Write @v and a newline on @fd (blocking, no SIGPIPE). 0 or -errno. */
int api_send_json(int fd, const json_t *v);
/* The same without waiting: -EAGAIN when the socket buffer is full. */
int api_send_json_nowait(int fd, const json_t *v);

#endif
