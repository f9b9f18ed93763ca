/* SPDX-License-Identifier: MIT */
/*
 * godwit demo's child processes (demo_child.c): two `godwit run` children
 * of this process, their command lines, their API sockets, their logs, and
 * the signals that stop the demo. cmd_demo.c runs the demo's steps.
 *
 * Threads: everything here runs on the tool's main thread; demo_stop is
 * also written by the signal handler.
 */
#ifndef GW_CLI_DEMO_H
#define GW_CLI_DEMO_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "cli/cli.h"

#define DEMO_ARGS_MAX 96

/* Counts SIGINT / SIGTERM once demo_catch_signals() ran. */
extern volatile sig_atomic_t demo_stop;
void demo_catch_signals(void);

struct child {
	const char *name;		/* "src", "dst" */
	pid_t pid;			/* 0 = not started or reaped */
	int status;			/* wait status once reaped */
	char api[PATH_MAX];		/* its API socket */
};

/* A child's command line, built with demo_argv_add (at most DEMO_ARGS_MAX words). */
struct argv_buf {
	unsigned n;
	char *v[DEMO_ARGS_MAX + 1];
};
void demo_argv_add(struct argv_buf *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void demo_argv_free(struct argv_buf *a);

/* fork + exec /proc/self/exe with @a; the child's stdout/stderr as given. 0 or -errno. */
int demo_spawn(struct child *c, struct argv_buf *a, int out_fd, int err_fd);
/* Reap @c if it exited. true when it is gone. */
bool demo_child_gone(struct child *c);
/* "exited with status N", "killed by ...". */
void demo_child_exit_text(const struct child *c, char *buf, size_t len);
/* Ask @c to quit over its API (or SIGTERM); kill it after a grace period; reap it. */
void demo_child_stop(struct child *c, bool ask);
/* Read "incoming <url>" from the destination's stdout @fd. 0 or -errno. */
int demo_read_incoming(int fd, struct child *dst, char *url, size_t url_len);
/*
 * Poll @c's status until its vm-status is @want (the status object in
 * *@st_out when not NULL). 0, or -errno with the reason in @err.
 */
int demo_wait_vm_status(struct child *c, const char *want, int timeout_ms,
			json_t **st_out, char *err, size_t err_len);
/* vm-status of @c now, into @buf ("gone" when the process has exited). */
void demo_vm_status_now(struct child *c, char *buf, size_t len);
/* The last error line a child printed ("godwit...: ...") in its log @path, "" without one. */
void demo_log_reason(const char *path, char *buf, size_t len);
/* DIR/NAME.log for writing, or -1 with the error printed. */
int demo_open_log(const char *dir, const char *name);

/* demo_tls.c: a test CA, the destination's and the source's certificates in one directory. */
#define TLS_CERTS_LOCAL_SAN "DNS:localhost,IP:127.0.0.1,IP:::1"	/* every server certificate's */
#define TLS_CERTS_SAN_MAX 1024
struct tls_certs_spec {
	const char *dir;		/* made 0700 if missing */
	const char *days;		/* validity, a decimal number of days */
	const char *ca_cn;		/* the CA's subject CN */
	const char *server_cn;		/* the destination's certificate: CN ... */
	const char *server_san;		/* ... and subjectAltName (openssl's syntax, < TLS_CERTS_SAN_MAX) */
	const char *client_cn;		/* the source's certificate: CN, and a DNS name the same */
};
/* The files in @sp->dir (QEMU's layout; the CA's key removed). 0 or -1 with @err. */
int tls_certs_make(const struct tls_certs_spec *sp, char *err, size_t err_len);
/* godwit demo --tls: tls_certs_make for this host, valid one day. */
int demo_tls_creds(const char *dir, char *err, size_t err_len);
/* Remove what demo_tls_creds made. */
void demo_tls_remove(const char *dir);

#endif
