/* SPDX-License-Identifier: MIT */
/*
 * godwit run, shared by its files:
 *   cmd_run.c    the process: options, backend, VM, signals, tear-down
 *   run_api.c    the API socket's requests (status, migrate, set, ...)
 *   run_watch.c  the watcher thread of each migration, and quitting
 *
 * Threads: main (set-up, then sigwaitinfo until quit/signal, then
 * tear-down), the API thread (all request handlers), one watcher thread per
 * migration, and the engine's and the VM's own threads. SIGINT, SIGTERM and
 * SIGUSR1 are blocked in every thread and taken by main alone; the other
 * threads ask main to quit by sending SIGUSR1 to the process.
 */
#ifndef GW_CLI_RUN_H
#define GW_CLI_RUN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <godwit/godwit.h>
#include "api.h"
#include "cli.h"
#include "vmm.h"

#define RUN_CHECK_MSG_MAX 256

struct run_state {
	/* Set before the API thread starts, read-only afterwards. */
	const struct run_opts *opts;
	const struct vmm_backend *be;	/* the --accel backend chosen */
	struct vmm *vm;			/* calls into it are thread-safe (vmm.h) */
	bool dest;			/* started with --incoming */

	pthread_mutex_t lock;		/* guards everything below */
	struct gw_session *sess;	/* current session; replaced only by the API
					   thread (migrate) and by main at tear-down */
	enum gw_role sess_role;
	bool watcher_started;		/* a watcher exists and was not joined */
	bool migrating;			/* the watcher has not seen the end yet */
	pthread_t watcher;
	struct cli_params base;		/* --set and API "set": every new session gets them */
	char check[RUN_CHECK_MSG_MAX + 16];	/* last explicit check: "ok", "failed: ...", "" none */
	int exit_code;
};

/* run_watch.c */

/* Ask main to quit (any thread). */
void run_request_quit(void);
/* Caller holds rs->lock, rs->sess is set: a watcher for this migration. 0 or -errno. */
int run_watcher_start(struct run_state *rs);
/* Caller holds rs->lock and rs->migrating is false: the watcher only returns now. */
void run_watcher_join(struct run_state *rs);
/* The VM's state name ("running", ...). */
const char *run_vm_status(const struct run_state *rs);

/* run_api.c: the API server's handler (opaque = the struct run_state). */
void run_api_handler(void *opaque, const struct api_request *req, FILE *out);

#endif
