/* SPDX-License-Identifier: MIT */
/*
 * godwit demo: both ends on this host as two child processes of this one.
 *
 *   1. destination: godwit run --incoming URL --api DIR/dst.sock
 *      (URL defaults to tcp:127.0.0.1:0; its stdout line "incoming <url>"
 *      tells the port it bound)
 *   2. source:      godwit run --api DIR/src.sock <run options>
 *   3. once the source reports vm-status running: migrate, poll to the end
 *   4. destination: guest progress sampled twice ~200 ms apart, the
 *      workload's verification result
 *   5. quit both, reap both (SIGKILL after a grace period)
 *
 * The children never outlive this process: they get PR_SET_PDEATHSIG
 * SIGKILL, and every exit path of this file quits or kills and reaps them.
 * Exit status 0 only if the migration completed, was verified and the
 * guest made progress on the destination.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_ARGS_MAX 96
#define DEMO_INCOMING_TIMEOUT_MS 30000	/* destination prints its URL */
#define DEMO_START_TIMEOUT_MS 300000	/* source filled its RAM and runs */
#define DEMO_RESUME_TIMEOUT_MS 10000	/* destination VM runs after completion */
#define DEMO_QUIT_GRACE_MS 10000	/* a child exits after "quit" */
#define DEMO_PROGRESS_GAP_MS 200

static volatile sig_atomic_t demo_stop;

static void on_signal(int sig)
{
	(void)sig;
	demo_stop = 1;
}

struct child {
	const char *name;		/* "src", "dst" */
	pid_t pid;			/* 0 = not started or reaped */
	int status;			/* wait status once reaped */
	char api[PATH_MAX];
};

struct argv_buf {
	unsigned n;
	char *v[DEMO_ARGS_MAX + 1];
};

static void argv_add(struct argv_buf *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void argv_add(struct argv_buf *a, const char *fmt, ...)
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

static void argv_free(struct argv_buf *a)
{
	while (a->n)
		free(a->v[--a->n]);
}

/* fork + exec /proc/self/exe with @a; the child's stdout/stderr as given. */
static int spawn(struct child *c, struct argv_buf *a, int out_fd, int err_fd)
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

/* Reap @c if it exited. true when it is gone. */
static bool child_gone(struct child *c)
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

static void describe_exit(const struct child *c, char *buf, size_t len)
{
	if (WIFEXITED(c->status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(c->status));
	else if (WIFSIGNALED(c->status))
		snprintf(buf, len, "killed by %s", strsignal(WTERMSIG(c->status)));
	else
		snprintf(buf, len, "ended");
}

/* Ask @c to quit over its API; kill it after a grace period; reap it. */
static void child_stop(struct child *c, bool ask)
{
	struct json *r = NULL;
	char err[256];
	int64_t deadline;

	if (child_gone(c))
		return;
	if (ask && !cli_api(c->api, "quit", &r, err, sizeof(err)))
		json_free(r);
	else
		kill(c->pid, SIGTERM);
	deadline = cli_now_ms() + DEMO_QUIT_GRACE_MS;
	while (!child_gone(c)) {
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

/* Read "incoming <url>" from the destination's stdout. */
static int read_incoming(int fd, struct child *dst, char *url, size_t url_len)
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
			return child_gone(dst) || n == 0 ? -EPIPE : -errno;
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

/* Status of @c's API, polling until vm-status is @want. */
static int wait_vm_status(struct child *c, const char *want, int timeout_ms,
			  struct json **st_out, char *err, size_t err_len)
{
	int64_t deadline = cli_now_ms() + timeout_ms;

	for (;;) {
		struct json *st = NULL;

		if (demo_stop) {
			snprintf(err, err_len, "interrupted");
			return -EINTR;
		}
		if (child_gone(c)) {
			char how[64];

			describe_exit(c, how, sizeof(how));
			snprintf(err, err_len, "the %s process %s", c->name, how);
			return -ECHILD;
		}
		if (!cli_api(c->api, "status", &st, err, err_len)) {
			if (!strcmp(json_str(json_get(st, "vm-status"), ""), want)) {
				if (st_out)
					*st_out = st;
				else
					json_free(st);
				return 0;
			}
			snprintf(err, err_len, "the %s VM is %s, not %s", c->name,
				 json_str(json_get(st, "vm-status"), "?"), want);
			json_free(st);
		}
		if (cli_now_ms() > deadline)
			return -ETIMEDOUT;
		cli_sleep_ms(50);
	}
}

/* vm-status of @c now, into @buf ("gone" when the process has exited). */
static void vm_status_now(struct child *c, char *buf, size_t len)
{
	struct json *st;
	char err[256];

	if (child_gone(c) || cli_api(c->api, "status", &st, err, sizeof(err))) {
		snprintf(buf, len, "gone");
		return;
	}
	snprintf(buf, len, "%s", json_str(json_get(st, "vm-status"), "?"));
	json_free(st);
}

static int open_log(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.log", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		cli_error("demo: cannot create %s: %s", path, strerror(errno));
	return fd;
}

static void demo_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit demo [RUN OPTIONS] [MIGRATE OPTIONS] [--to URL] [--json] [--keep-logs DIR]\n"
		"Run a destination and a source on this host, migrate once, report.\n"
		"\n"
		"Run options (for the source; the destination takes the source's layout):\n"
		"  --memory SIZE (default 1G) --vcpus N --accel kvm|soft|auto --seed N\n"
		"  --workload SPEC (default verify) --fill zero|mix|random|text|none\n"
		"  --memory-file PATH (source only) --log-level error|warn|info|debug\n"
		"Migrate options: --channels N --compress ALG[:LEVEL] --xbzrle[=SIZE]\n"
		"  --downtime-limit MS --max-bandwidth RATE --converge-timeout MS\n"
		"  --on-timeout cancel|force --local --no-verify --set PARAM=VALUE\n"
		"Demo options:\n"
		"  --to URL          where the destination listens (default tcp:127.0.0.1:0,\n"
		"                    with --local a unix: socket in a private directory)\n"
		"  --dst-set P=V     parameter for the destination's session (repeatable)\n"
		"  --no-dst-prealloc the destination takes its size from the migration and\n"
		"                    allocates RAM as pages arrive (default: it is created with\n"
		"                    the source's --memory and --prealloc, before migrating)\n"
		"  --json            print one JSON object: the statistics plus verified,\n"
		"                    guest-progress, source-vm-status, destination-vm-status\n"
		"  --keep-logs DIR   write the children's logs to DIR/src.log and DIR/dst.log\n"
		"                    (default: they go to stderr)\n"
		"\n"
		"Exit status: 0 if the migration completed, was verified and the guest made\n"
		"progress on the destination; 1 otherwise; 2 bad usage.\n");
}

int cmd_demo(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		CLI_RUN_VM_OPTS,
		CLI_MIGRATE_PARAM_OPTS,
		{ "to", required_argument, NULL, OPT_TO },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "keep-logs", required_argument, NULL, OPT_KEEP_LOGS },
		{ "dst-set", required_argument, NULL, OPT_DST_SET },
		{ "no-dst-prealloc", no_argument, NULL, OPT_NO_DST_PREALLOC },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const skip[] = {
		"ok", "role", "vm-status", "verified", "verify-check", "guest-progress-count",
		"incoming-url", NULL,
	};
	struct child src = { .name = "src" }, dst = { .name = "dst" };
	struct argv_buf sa = { 0 }, da = { 0 };
	struct run_opts ro;
	struct migrate_opts mo;
	struct sigaction act;
	const char *keep_logs = NULL, *listen_url = NULL;
	bool dst_prealloc = true, local = false;
	char tmpdir[PATH_MAX], url[512], err[512], src_vs[64] = "gone", dst_vs[64] = "gone";
	char dst_check[300] = "n/a", detail[400] = "", local_url[PATH_MAX + 16];
	struct json *final = NULL, *st = NULL, *r = NULL;
	int dst_out[2] = { -1, -1 }, src_log = STDERR_FILENO, dst_log = STDERR_FILENO;
	int c, i, ret = CLI_EXIT_FAIL, verified = 0, progress = -1;
	bool completed = false, have_tmp = false, verify_on;
	uint64_t p1 = 0, p2 = 0;
	int64_t vv;

	run_opts_init(&ro);
	ro.workload = "verify";
	memset(&mo, 0, sizeof(mo));
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			demo_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':') {
			cli_bad_option("demo", c, argv);
			return CLI_EXIT_USAGE;
		}
		if (c == OPT_KEEP_LOGS) {
			keep_logs = optarg;
			continue;
		}
		if (c == OPT_NO_DST_PREALLOC) {
			dst_prealloc = false;
			continue;
		}
		if (c == OPT_TO) {
			listen_url = optarg;
			continue;
		}
		if (c == OPT_DST_SET) {
			/* Checked here so that a typo fails before anything starts. */
			if (run_opt_apply(&ro, OPT_SET, optarg, "demo"))
				return CLI_EXIT_USAGE;
			continue;
		}
		if (c == OPT_JSON) {
			mo.json = true;
			continue;
		}
		if (c != OPT_SET) {
			/* --set belongs to the migration; the rest of run's to the VM. */
			int taken = run_opt_apply(&ro, c, optarg, "demo");

			if (taken < 0)
				return CLI_EXIT_USAGE;
			if (taken == 0)
				continue;
		}
		if (migrate_opt_apply(&mo, c, optarg, "demo"))
			return CLI_EXIT_USAGE;
	}
	if (optind < argc) {
		cli_usage_error("demo", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (listen_url && strpbrk(listen_url, " \t\n")) {
		cli_usage_error("demo", "--to: bad URL '%s'", listen_url);
		return CLI_EXIT_USAGE;
	}
	migrate_opts_finish(&mo);
	vv = gw_param_info(GW_PARAM_VERIFY) ? gw_param_info(GW_PARAM_VERIFY)->def : 1;
	for (i = 0; i < (int)mo.params.nr; i++)
		if (mo.params.v[i].p == GW_PARAM_VERIFY)
			vv = mo.params.v[i].value;
	verify_on = vv != 0;

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_signal;
	sigemptyset(&act.sa_mask);
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	signal(SIGPIPE, SIG_IGN);

	snprintf(tmpdir, sizeof(tmpdir), "%s/godwit-demo.XXXXXX",
		 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		cli_error("demo: cannot create a directory for the API sockets: %s", strerror(errno));
		return CLI_EXIT_FAIL;
	}
	have_tmp = true;
	if (snprintf(src.api, sizeof(src.api), "%s/src.sock", tmpdir) >= (int)sizeof(src.api) ||
	    snprintf(dst.api, sizeof(dst.api), "%s/dst.sock", tmpdir) >= (int)sizeof(dst.api)) {
		cli_error("demo: TMPDIR path too long");
		goto out;
	}
	/* --local passes RAM fds, which only a unix: socket can carry. */
	for (i = 0; i < (int)mo.params.nr; i++)
		if (mo.params.v[i].p == GW_PARAM_LOCAL && mo.params.v[i].value)
			local = true;
	if (local && !listen_url)
		listen_url = local_url;
	if (!listen_url)
		listen_url = "tcp:127.0.0.1:0";
	else if (listen_url == local_url &&
		 snprintf(local_url, sizeof(local_url), "unix:%s/mig.sock", tmpdir) >= (int)sizeof(local_url)) {
		cli_error("demo: TMPDIR path too long");
		goto out;
	}
	if (keep_logs) {
		if (mkdir(keep_logs, 0755) && errno != EEXIST) {
			cli_error("demo: cannot create %s: %s", keep_logs, strerror(errno));
			goto out;
		}
		src_log = open_log(keep_logs, "src");
		dst_log = open_log(keep_logs, "dst");
		if (src_log < 0 || dst_log < 0)
			goto out;
	}
	if (pipe2(dst_out, O_CLOEXEC)) {
		cli_error("demo: pipe: %s", strerror(errno));
		goto out;
	}

	argv_add(&da, "godwit");
	argv_add(&da, "run");
	argv_add(&da, "--incoming=%s", listen_url);
	argv_add(&da, "--api=%s", dst.api);
	argv_add(&da, "--vcpus=%u", ro.nr_vcpus);
	/*
	 * Like a real destination, it is created with the guest's size before
	 * the migrate command and its RAM preallocated (QEMU -mem-prealloc):
	 * first touches of memory are not part of the migration. With --local
	 * it maps the source's memory instead: nothing to preallocate.
	 */
	if (dst_prealloc && !local) {
		argv_add(&da, "--memory=%" PRIu64, ro.memory_bytes);
		argv_add(&da, "--prealloc");
	}
	argv_add(&da, "--accel=%s", ro.accel);
	if (ro.log_level)
		argv_add(&da, "--log-level=%s", ro.log_level);
	for (i = 0; i < (int)ro.params.nr; i++)
		argv_add(&da, "--set=%s=%" PRId64, gw_param_info(ro.params.v[i].p)->name,
			 ro.params.v[i].value);

	argv_add(&sa, "godwit");
	argv_add(&sa, "run");
	argv_add(&sa, "--api=%s", src.api);
	argv_add(&sa, "--memory=%" PRIu64, ro.memory_bytes);
	argv_add(&sa, "--vcpus=%u", ro.nr_vcpus);
	argv_add(&sa, "--accel=%s", ro.accel);
	argv_add(&sa, "--workload=%s", ro.workload);
	argv_add(&sa, "--fill=%s", ro.fill);
	argv_add(&sa, "--seed=%" PRIu64, ro.seed);
	if (ro.memory_file)
		argv_add(&sa, "--memory-file=%s", ro.memory_file);
	if (ro.log_level)
		argv_add(&sa, "--log-level=%s", ro.log_level);

	if (spawn(&dst, &da, dst_out[1], dst_log)) {
		cli_error("demo: cannot start the destination: %s", strerror(errno));
		goto out;
	}
	close(dst_out[1]);
	dst_out[1] = -1;
	/* The source's stdout joins our stderr: our stdout is the report. */
	if (spawn(&src, &sa, src_log == STDERR_FILENO ? STDERR_FILENO : src_log, src_log)) {
		cli_error("demo: cannot start the source: %s", strerror(errno));
		goto out;
	}

	c = read_incoming(dst_out[0], &dst, url, sizeof(url));
	if (c) {
		if (c == -EPIPE && child_gone(&dst)) {
			char how[64];

			describe_exit(&dst, how, sizeof(how));
			cli_error("demo: the destination %s before listening", how);
		} else {
			cli_error("demo: no 'incoming URL' line from the destination: %s", strerror(-c));
		}
		goto out;
	}
	if (wait_vm_status(&src, "running", DEMO_START_TIMEOUT_MS, NULL, err, sizeof(err))) {
		cli_error("demo: the source did not start: %s", err);
		goto out;
	}
	if (!mo.json)
		fprintf(stderr, "godwit demo: migrating to %s\n", url);

	{
		char *line = cli_params_line("migrate", url, &mo.params);

		if (!line || cli_api(src.api, line, &r, err, sizeof(err))) {
			cli_error("demo: migrate: %s", line ? err : "out of memory");
			free(line);
			goto out;
		}
		free(line);
		json_free(r);
		r = NULL;
	}
	if (cli_wait_migration(src.api, !mo.json && isatty(STDERR_FILENO), &demo_stop, &final,
			       err, sizeof(err))) {
		cli_error("demo: while migrating: %s", err);
		goto out;
	}
	completed = cli_status_is(final, GW_STATUS_COMPLETED);

	if (completed) {
		if (wait_vm_status(&dst, "running", DEMO_RESUME_TIMEOUT_MS, &st, err, sizeof(err))) {
			cli_error("demo: destination: %s", err);
			progress = 0;
		} else {
			p1 = (uint64_t)json_num(json_get(st, "guest-progress-count"), 0);
			json_free(st);
			st = NULL;
			cli_sleep_ms(DEMO_PROGRESS_GAP_MS);
			if (!cli_api(dst.api, "status", &st, err, sizeof(err))) {
				p2 = (uint64_t)json_num(json_get(st, "guest-progress-count"), 0);
				snprintf(dst_check, sizeof(dst_check), "%s",
					 json_str(json_get(st, "verify-check"), "n/a"));
				json_free(st);
				st = NULL;
			}
			progress = p2 > p1;
			/* No automatic check result yet: ask for one. */
			if (!strcmp(dst_check, "n/a") && !cli_api(dst.api, "check", &r, err, sizeof(err))) {
				const char *res = json_str(json_get(r, "result"), "n/a");

				if (!strcmp(res, "mismatch"))
					snprintf(dst_check, sizeof(dst_check), "failed: %s",
						 json_str(json_get(r, "message"), ""));
				else
					snprintf(dst_check, sizeof(dst_check), "%s", res);
				json_free(r);
				r = NULL;
			}
		}
		/* verified: at least one check ran, and none failed. */
		{
			bool digest = json_bool(json_get(final, "verified"), false);
			int run = 0, bad = 0;

			if (verify_on) {
				run++;
				bad += !digest;
			}
			if (!strcmp(dst_check, "ok"))
				run++;
			else if (strcmp(dst_check, "n/a"))
				run++, bad++;
			verified = run > 0 && !bad;
			snprintf(detail, sizeof(detail), "RAM digest %s, workload check %s",
				 verify_on ? (digest ? "equal" : "NOT equal") : "off", dst_check);
		}
	}
	vm_status_now(&src, src_vs, sizeof(src_vs));
	vm_status_now(&dst, dst_vs, sizeof(dst_vs));

	if (mo.json) {
		putchar('{');
		if (json_write_members(stdout, final, skip))
			putchar(',');
		printf("\"verified\":%s,\"guest-progress\":%s,\"source-vm-status\":",
		       verified ? "true" : "false", progress > 0 ? "true" : "false");
		json_write_string(stdout, src_vs);
		fputs(",\"destination-vm-status\":", stdout);
		json_write_string(stdout, dst_vs);
		fputs(",\"destination-verify-check\":", stdout);
		json_write_string(stdout, dst_check);
		printf(",\"guest-progress-samples\":[%" PRIu64 ",%" PRIu64 "]}\n", p1, p2);
	} else {
		struct report_extra x;

		report_extra_init(&x);
		x.verified = completed ? verified : -1;
		x.verify_detail = detail[0] ? detail : NULL;
		x.guest_progress = progress;
		x.source_vm_status = src_vs;
		x.destination_vm_status = dst_vs;
		report_print(stdout, final, &x);
	}
	fflush(stdout);
	ret = completed && verified && progress > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;

out:
	json_free(final);
	json_free(st);
	json_free(r);
	child_stop(&src, !demo_stop);
	child_stop(&dst, !demo_stop);
	if (dst_out[0] >= 0)
		close(dst_out[0]);
	if (dst_out[1] >= 0)
		close(dst_out[1]);
	if (src_log > STDERR_FILENO)
		close(src_log);
	if (dst_log > STDERR_FILENO)
		close(dst_log);
	if (have_tmp) {
		unlink(src.api);
		unlink(dst.api);
		if (listen_url == local_url)
			unlink(local_url + 5);
		rmdir(tmpdir);
	}
	argv_free(&sa);
	argv_free(&da);
	if (demo_stop && ret != CLI_EXIT_OK)
		fprintf(stderr, "godwit demo: interrupted; both children stopped\n");
	return ret;
}
