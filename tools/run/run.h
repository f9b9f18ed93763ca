/* SPDX-License-Identifier: MIT */
/*
 * godwit run, shared by its files:
 *   cli/cmd_run.c the process: options, backend, VM, signals, tear-down
 *   run_ops.c     what can be asked of the VM (status, migrate, cancel, set,
 *                 incoming, stop, cont, postcopy), whichever socket asks it
 *   run_api.c     the godwit API socket's requests (docs/api.md)
 *   qmp_cmds.c    the QMP socket's commands (docs/qmp.md)
 *   run_events.c  events: the engine's, fanned out to API streams and QMP
 *   run_watch.c   the watcher thread of each migration, and quitting
 *
 * Threads: main (set-up, then sigwaitinfo until quit/signal, then
 * tear-down), the API thread and the QMP thread (each serves its requests
 * one at a time; both call run_ops.c), one watcher thread per migration,
 * and the engine's and the VM's own threads (the engine's migration thread
 * calls run_events.c). SIGINT, SIGTERM and SIGUSR1 are blocked in every
 * thread and taken by main alone; the other threads ask main to quit by
 * sending SIGUSR1 to the process.
 */
#ifndef GW_CLI_RUN_H
#define GW_CLI_RUN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <godwit/godwit.h>
#include "common/api.h"
#include "common/exit.h"
#include "common/params.h"
#include "run/opts.h"
#include "vmm.h"

#define RUN_CHECK_MSG_MAX 256
#define RUN_ERR_MAX 512			/* a refusal's reason */

struct run_events;

/* QEMU's view of some parameters (qmp_cmds.c), kept while their capability is off. */
struct run_qemu_caps {
	bool events;			/* "events": MIGRATION and MIGRATION_PASS are sent */
	int64_t xbzrle_cache_bytes;	/* xbzrle-cache-size (QEMU default 64 MiB) */
	int64_t multifd_channels;	/* multifd-channels (QEMU default 2) */
	int64_t dirty_limit_bps;	/* vcpu-dirty-limit (QEMU default 1 MiB/s) */
};

#define RUN_QEMU_OBJS_MAX 8
#define RUN_QEMU_ID_MAX 64		/* with the NUL */

/* A QEMU object from object-add (qmp_flow.c): TLS credentials or an authz list. */
struct run_qemu_obj {
	char id[RUN_QEMU_ID_MAX];		/* "" = a free slot */
	const char *type;			/* "tls-creds-x509", "tls-creds-psk", "authz-simple" */
	bool server;				/* endpoint=server: the listening side's credentials */
	char value[GW_SPARAM_MAX_BYTES];	/* x509: dir; psk: dir/keys.psk; authz: identity */
};

/* QEMU's TLS objects and the parameters that name them, as QMP set them. */
struct run_qemu_tls {
	struct run_qemu_obj obj[RUN_QEMU_OBJS_MAX];
	char creds[RUN_QEMU_ID_MAX];		/* tls-creds: an object id, "" = none */
	char hostname[GW_SPARAM_MAX_BYTES];	/* tls-hostname */
	char authz[RUN_QEMU_ID_MAX];		/* tls-authz: an object id, "" = none */
};

struct run_state {
	/* Set before the API and QMP threads start, read-only afterwards. */
	const struct run_opts *opts;
	const struct vmm_backend *be;	/* the --accel backend chosen */
	struct vmm *vm;			/* calls into it are thread-safe (vmm.h) */
	bool dest;			/* started with --incoming */
	bool defer;			/* --incoming defer: listen when asked (incoming, migrate-incoming) */
	struct run_events *events;	/* thread-safe (run_events.c) */

	pthread_mutex_t lock;		/* guards everything below */
	struct gw_session *sess;	/* current session; replaced only by the API or
					   QMP thread (migrate, incoming) and by main at
					   tear-down */
	enum gw_role sess_role;
	bool watcher_started;		/* a watcher exists and was not joined */
	bool migrating;			/* lock to write, atomic reads: a migration was
					   started and its watcher has not settled its end */
	pthread_t watcher;
	struct cli_params base;		/* --set, API set, QMP: every new session gets them */
	char check[RUN_CHECK_MSG_MAX + 16];	/* last explicit check: "ok", "failed: ...", "" none */
	int exit_code;
	bool exit_on_error;		/* destination: a failed incoming migration ends the process */
	struct run_qemu_caps qemu;
	struct run_qemu_tls qtls;	/* the QMP thread's (object-add, migrate-set-parameters) */
};

/* ---- run_ops.c: callers do not hold rs->lock; 0 or -errno with the reason in @err ---- */

/*
 * The status object of docs/api.md: the engine's statistics plus role,
 * vm-status, workload, guest-progress-count, verify-check, incoming-url,
 * settled. NULL when out of memory.
 */
json_t *run_status(struct run_state *rs);
/* Destination session @s: the memory cap (max-memory-bytes) from --memory, --max-memory or what this host can give (MemAvailable). 0, or -errno with @err. */
int run_dest_memory_cap(struct run_state *rs, struct gw_session *s, char *err, size_t err_len);
/* A new outgoing migration to @url with the base parameters overridden by @ps. */
int run_migrate(struct run_state *rs, const char *url, const struct cli_params *ps,
		char *err, size_t err_len);
/* Cancel the running migration. -ENOENT when none runs. */
int run_cancel(struct run_state *rs, char *err, size_t err_len);
/*
 * Parameters for the running migration (live ones only, all or nothing)
 * and every later one. *@now: they took effect at once.
 */
int run_set(struct run_state *rs, const struct cli_params *ps, bool *now, char *err, size_t err_len);
/* The value of every parameter a migration started now would get (running: its own). */
void run_params_now(struct run_state *rs, int64_t values[GW_PARAM__COUNT]);
/* --incoming defer: listen on @url now. */
int run_incoming(struct run_state *rs, const char *url, bool exit_on_error,
		 char *err, size_t err_len);
/*
 * Why no outgoing migration may start here, lasting until an operator acts
 * (an unknown or mismatched last outcome: QEMU's blocked-reasons): -EPERM
 * with the reason in @err, or 0 (a busy or destination side is not blocked).
 */
int run_migrate_blocked(struct run_state *rs, char *err, size_t err_len);
/* pause-before-switchover: let the paused source go on (migrate-continue). */
int run_continue(struct run_state *rs, char *err, size_t err_len);
/* Postcopy: switch the running outgoing migration now (start-postcopy, migrate-start-postcopy). */
int run_start_postcopy(struct run_state *rs, char *err, size_t err_len);
/*
 * Postcopy paused: reconnect the source to @url (@recover false: resume,
 * QMP migrate resume=true), or listen on @url on the destination (@recover
 * true: recover, migrate-recover). The URL in use into @bound.
 */
int run_postcopy_reconnect(struct run_state *rs, bool recover, const char *url, char *bound,
			   size_t bound_len, char *err, size_t err_len);
/* Pause / resume the vCPUs (QMP stop / cont); refused during a migration. */
int run_stop(struct run_state *rs, char *err, size_t err_len);
int run_cont(struct run_state *rs, char *err, size_t err_len);
/* The session's settings every new session gets: base parameters, event callback. */
int run_session_prepare(struct run_state *rs, struct gw_session *s, const struct cli_params *ps,
			char *err, size_t err_len);

/* ---- run_watch.c ---- */

/* Ask main to quit (any thread). */
void run_request_quit(void);
/* Caller holds rs->lock, rs->sess is set and rs->migrating true: a watcher for it. 0 or -errno. */
int run_watcher_start(struct run_state *rs);
/* Caller holds rs->lock and rs->migrating is false: the watcher only returns now. */
void run_watcher_join(struct run_state *rs);
/* The VM's state name ("running", ...). */
const char *run_vm_status(const struct run_state *rs);

/* ---- qmp_cmds.c: the QMP socket (--qmp PATH) ---- */
struct run_qmp;
/* Serve QMP on @path; its events come from rs->events. NULL with the reason in @err. */
struct run_qmp *run_qmp_start(struct run_state *rs, const char *path, char *err, size_t err_len);
/* Stop serving (NULL is fine). */
void run_qmp_stop(struct run_state *rs, struct run_qmp *q);

/* ---- run_api.c: the API server's handler (opaque = the struct run_state) ---- */
json_t *run_api_handler(void *opaque, const struct api_request *req, int fd);

#endif
