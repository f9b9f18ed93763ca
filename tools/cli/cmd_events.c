/* SPDX-License-Identifier: MIT */
/*
 * godwit events --api PATH: follow a running VM's events as JSON lines on
 * stdout (docs/api.md, "events"): status changes, round starts, the VM
 * paused or resumed on request. Until the VM process goes away, Ctrl-C,
 * or (--until-end) the end of a migration.
 */
#include "cli/cli.h"
#include "common/api.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define EVENT_LINE_MAX 4096

static void events_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit events --api PATH [--until-end]\n"
		"Follow the VM's events as JSON lines on stdout: {\"event\":\"status\",...} when a\n"
		"migration's status changes, {\"event\":\"round\",...} when a round starts,\n"
		"{\"event\":\"vm\",...} when the VM is paused or resumed on request.\n"
		"\n"
		"  --api PATH     the VM's godwit API socket\n"
		"  --until-end    stop after the first completed, failed, cancelled or unknown status\n"
		"                 (default: until the VM process goes away or Ctrl-C)\n"
		"\n"
		"Exit status: 0, 1 the API did not answer, 2 bad usage.\n");
}

static bool is_end(const json_t *ev)
{
	const char *s = js_str(js_get(ev, "status"), "");

	return !strcmp(js_str(js_get(ev, "event"), ""), "status") &&
	       (!strcmp(s, "completed") || !strcmp(s, "failed") || !strcmp(s, "cancelled") ||
		!strcmp(s, "unknown"));
}

/* Print lines from @fd until it closes, a signal, or (@until_end) the end. */
static int follow(int fd, bool until_end, volatile sig_atomic_t *stop)
{
	char buf[EVENT_LINE_MAX + 1], perr[128];
	size_t len = 0;

	while (!*stop) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char *nl;
		ssize_t n;

		if (poll(&pfd, 1, 500) <= 0)
			continue;
		n = recv(fd, buf + len, EVENT_LINE_MAX - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return CLI_EXIT_OK;	/* the VM process went away */
		len += (size_t)n;
		while ((nl = memchr(buf, '\n', len))) {
			json_t *ev = js_parse(buf, (size_t)(nl - buf), perr, sizeof(perr));
			bool end = ev && is_end(ev);

			if (ev) {
				js_write(stdout, ev);
				putchar('\n');
				fflush(stdout);
			}
			json_decref(ev);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
			if (until_end && end)
				return CLI_EXIT_OK;
		}
		if (len == EVENT_LINE_MAX) {
			cli_error("events: a line longer than %d bytes", EVENT_LINE_MAX);
			return CLI_EXIT_FAIL;
		}
	}
	return CLI_EXIT_OK;
}

int cmd_events(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		{ "api", required_argument, NULL, OPT_API },
		{ "until-end", no_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	static volatile sig_atomic_t stop;
	char first[512], perr[128];
	const char *api = NULL;
	bool until_end = false;
	json_t *ok;
	ssize_t n;
	int c, fd, ret;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			events_usage(stdout);
			return CLI_EXIT_OK;
		case OPT_API:
			api = optarg;
			break;
		case 'u':
			until_end = true;
			break;
		default:
			cli_bad_option("events", c, argv);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_usage_error("events", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (!api) {
		cli_usage_error("events", "--api PATH is required");
		return CLI_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	fd = api_open_stream(api, "events");
	if (fd < 0) {
		cli_error("events: cannot reach the API at %s: %s", api, strerror(-fd));
		return CLI_EXIT_FAIL;
	}
	/* The first line answers the request; events follow. */
	n = 0;
	while (n < (ssize_t)sizeof(first) - 1) {
		ssize_t r = recv(fd, first + n, 1, 0);

		if (r <= 0 || first[n] == '\n')
			break;
		n++;
	}
	first[n] = '\0';
	ok = js_parse(first, (size_t)n, perr, sizeof(perr));
	if (!js_bool(js_get(ok, "ok"), false)) {
		cli_error("events: %s", ok ? js_str(js_get(ok, "error"), "refused") : "no answer");
		json_decref(ok);
		close(fd);
		return CLI_EXIT_FAIL;
	}
	json_decref(ok);
	cli_catch_interrupts(&stop);
	ret = follow(fd, until_end, &stop);
	close(fd);
	return ret;
}
