/* SPDX-License-Identifier: MIT */
/*
 * godwit demo's children: started from /proc/self/exe, watched through
 * their API sockets, stopped with "quit" (or SIGTERM) and reaped. The
 * children never outlive this process: they get PR_SET_PDEATHSIG SIGKILL.
 */
#include "cli/demo.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_INCOMING_TIMEOUT_MS 300000	/* destination preallocated its RAM (~4 s/GiB here) and prints its URL */
#define DEMO_QUIT_GRACE_MS 10000	/* a child exits after "quit" */

volatile sig_atomic_t demo_stop;

void demo_catch_signals(void)
{
	cli_catch_interrupts(&demo_stop);
	signal(SIGPIPE, SIG_IGN);
}

void demo_argv_add(struct argv_buf *a, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	if (a->n >= DEMO_ARGS_MAX)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (s)
		a->v[a->n++] = s;
}

void demo_argv_free(struct argv_buf *a)
{
	while (a->n)
		free(a->v[--a->n]);
}

int demo_spawn(struct child *c, struct argv_buf *a, int out_fd, int err_fd)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigset_t none;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);	/* the parent died before prctl */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (out_fd >= 0 && out_fd != STDOUT_FILENO)
			dup2(out_fd, STDOUT_FILENO);
		if (err_fd >= 0 && err_fd != STDERR_FILENO)
			dup2(err_fd, STDERR_FILENO);
		a->v[a->n] = NULL;
		execv("/proc/self/exe", a->v);
		fprintf(stderr, "godwit demo: cannot exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	c->pid = pid;
	return 0;
}

bool demo_child_gone(struct child *c)
{
	pid_t r;

	if (!c->pid)
		return true;
	r = waitpid(c->pid, &c->status, WNOHANG);
	if (r == c->pid || (r < 0 && errno == ECHILD)) {
		c->pid = 0;
		return true;
	}
	return false;
}

void demo_child_exit_text(const struct child *c, char *buf, size_t len)
{
	if (WIFEXITED(c->status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(c->status));
	else if (WIFSIGNALED(c->status))
		snprintf(buf, len, "killed by %s", strsignal(WTERMSIG(c->status)));
	else
		snprintf(buf, len, "ended");
}

void demo_child_stop(struct child *c, bool ask)
{
	json_t *r = NULL;
	char err[256];
	int64_t deadline;

	if (demo_child_gone(c))
		return;
	if (ask && !cli_api(c->api, "quit", &r, err, sizeof(err)))
		json_decref(r);
	else
		kill(c->pid, SIGTERM);
	deadline = cli_now_ms() + DEMO_QUIT_GRACE_MS;
	while (!demo_child_gone(c)) {
		if (cli_now_ms() > deadline) {
			fprintf(stderr, "godwit demo: %s did not exit: killing it\n", c->name);
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &c->status, 0);
			c->pid = 0;
			return;
		}
		cli_sleep_ms(20);
	}
}

int demo_read_incoming(int fd, struct child *dst, char *url, size_t url_len)
{
	char buf[512];
	size_t len = 0;
	int64_t deadline = cli_now_ms() + DEMO_INCOMING_TIMEOUT_MS;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char *nl;
		ssize_t n;
		int r;

		if (demo_stop)
			return -EINTR;
		if (cli_now_ms() > deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, 100);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return demo_child_gone(dst) || n == 0 ? -EPIPE : -errno;
		len += (size_t)n;
		buf[len] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			*nl = '\0';
			if (!strncmp(buf, "incoming ", 9)) {
				snprintf(url, url_len, "%s", buf + 9);
				return 0;
			}
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
		if (len == sizeof(buf) - 1)
			return -EPROTO;
	}
}

int demo_wait_vm_status(struct child *c, const char *want, int timeout_ms,
			json_t **st_out, char *err, size_t err_len)
{
	int64_t deadline = cli_now_ms() + timeout_ms;

	for (;;) {
		json_t *st = NULL;

		if (demo_stop) {
			snprintf(err, err_len, "interrupted");
			return -EINTR;
		}
		if (demo_child_gone(c)) {
			char how[64];

			demo_child_exit_text(c, how, sizeof(how));
			snprintf(err, err_len, "the %s process %s", c->name, how);
			return -ECHILD;
		}
		if (!cli_api(c->api, "status", &st, err, err_len)) {
			if (!strcmp(js_str(js_get(st, "vm-status"), ""), want)) {
				if (st_out)
					*st_out = st;
				else
					json_decref(st);
				return 0;
			}
			snprintf(err, err_len, "the %s VM is %s, not %s", c->name,
				 js_str(js_get(st, "vm-status"), "?"), want);
			json_decref(st);
		}
		if (cli_now_ms() > deadline)
			return -ETIMEDOUT;
		cli_sleep_ms(50);
	}
}

void demo_vm_status_now(struct child *c, char *buf, size_t len)
{
	json_t *st;
	char err[256];

	if (demo_child_gone(c) || cli_api(c->api, "status", &st, err, sizeof(err))) {
		snprintf(buf, len, "gone");
		return;
	}
	snprintf(buf, len, "%s", js_str(js_get(st, "vm-status"), "?"));
	json_decref(st);
}

void demo_log_reason(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	char line[1024];

	buf[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "godwit", 6))
			continue;	/* log lines; the error is the CLI's own "godwit...: " line */
		line[strcspn(line, "\n")] = '\0';
		snprintf(buf, len, "%s", line);
	}
	fclose(f);
}

int demo_open_log(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.log", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		cli_error("demo: cannot create %s: %s", path, strerror(errno));
	return fd;
}
