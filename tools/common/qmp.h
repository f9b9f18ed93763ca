/* SPDX-License-Identifier: MIT */
/*
 * A QMP-compatible control socket (QEMU Machine Protocol, docs/qmp.md):
 * the transport. On connect the server sends the greeting; the client
 * negotiates with qmp_capabilities, then sends {"execute":NAME,
 * "arguments":{...}, "id":ANY} objects (one or more per line, or one
 * across lines) and gets {"return":...} or {"error":{"class":...,
 * "desc":...}}, with its "id" echoed; {"event":...,"data":...,
 * "timestamp":{...}} messages arrive in between, once negotiated.
 *
 * Threads: the server thread accepts clients, reads and dispatches their
 * commands one at a time (the command table's functions run on it);
 * qmp_server_event() may be called from any thread. Writes to a client are
 * serialised by the server's lock; a client that does not read its events
 * is disconnected rather than waited for.
 */
#ifndef GW_CLI_QMP_H
#define GW_CLI_QMP_H

#include <stdbool.h>
#include <stddef.h>
#include "common/json.h"

#define QMP_CLIENTS_MAX 8		/* QEMU serves one per socket; a few do no harm; a 9th evicts the idlest */
#define QMP_NEGOTIATE_MS 10000		/* a client without qmp_capabilities by then is dropped */
#define QMP_INPUT_MAX (64 * 1024)	/* one command; longer input closes the client */

/* An error answer: QEMU's class ("GenericError", "CommandNotFound", ...) and text. */
struct qmp_error {
	const char *cls;
	char desc[512];
};
void qmp_error_set(struct qmp_error *e, const char *cls, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A command: @fn gets the "arguments" object (an empty one when absent)
 * and returns the "return" value (a new reference; {} for none), or NULL
 * with @e set. @args lists the argument names it takes (NULL-terminated;
 * others are refused before @fn runs, as QEMU does); { "*", NULL }: the
 * command checks them itself.
 */
struct qmp_command {
	const char *name;
	json_t *(*fn)(void *opaque, json_t *args, struct qmp_error *e);
	const char *const *args;
};

struct qmp_server;

/*
 * Serve @cmds (terminated by a NULL name) on the UNIX socket @path (mode
 * 0600; a stale socket is replaced, a live one is an error). @greeting is
 * the object sent as {"QMP": greeting} (the server keeps a reference).
 * NULL with errno and a reason in @err.
 */
struct qmp_server *qmp_server_start(const char *path, const struct qmp_command *cmds,
				    void *opaque, json_t *greeting, char *err, size_t err_len);
/* Stop, join, close every client, remove the socket. NULL is fine. */
void qmp_server_stop(struct qmp_server *srv);
/* Send {"event":@name,"data":@data (may be NULL),"timestamp":now} to every negotiated client. */
void qmp_server_event(struct qmp_server *srv, const char *name, json_t *data);

/*
 * The length of the first complete JSON object or array in @buf[0..@len)
 * (after leading whitespace, which it includes), 0 when more input is
 * needed, or -1 when the input cannot start a JSON object or array (the
 * caller skips to the next newline). Strings and escapes are honoured.
 */
long qmp_frame(const char *buf, size_t len);

#endif
