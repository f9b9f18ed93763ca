/* SPDX-License-Identifier: MIT */
/*
 * A QMP client for the godwit tool: `godwit migrate/status --qmp PATH`
 * drive godwit's QMP socket or QEMU's own with it. Synchronous: one
 * command, then its answer; events that arrive meanwhile are skipped.
 * Owned by one thread.
 */
#ifndef GW_CLI_QMP_CLIENT_H
#define GW_CLI_QMP_CLIENT_H

#include <stddef.h>
#include "common/json.h"

#define QMPC_TIMEOUT_MS 10000	/* one answer */

struct qmpc;

/* Connect, read the greeting, negotiate (qmp_capabilities). NULL with the reason in @err. */
struct qmpc *qmpc_open(const char *path, char *err, size_t err_len);
void qmpc_close(struct qmpc *q);
/* The greeting's "QMP" object (borrowed). */
const json_t *qmpc_greeting(const struct qmpc *q);
/*
 * Execute @cmd with @args (a reference taken over; NULL: none). 0 and the
 * "return" value in *@ret (NULL: not wanted); -EINVAL with "CLASS: desc" in
 * @err when the server answered an error; -errno (I/O, -ETIMEDOUT, -EPROTO).
 */
int qmpc_execute(struct qmpc *q, const char *cmd, json_t *args, json_t **ret,
		 char *err, size_t err_len);

#endif
