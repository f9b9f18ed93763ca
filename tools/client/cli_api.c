/* SPDX-License-Identifier: MIT */
/*
 * Asking a running godwit: one API request and its answer checked
 * (cli_api), what a status answer says, and the monotonic clock and the
 * sleeps the commands poll it with.
 */
#include "client/client.h"
#include "common/api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_api(const char *path, const char *line, json_t **reply, char *err, size_t err_len)
{
	json_t *j;
	char *text = NULL, perr[128];
	int ret;

	*reply = NULL;
	ret = api_call(path, line, &text, CLI_API_TIMEOUT_MS);
	if (ret) {
		if (ret == -ENOENT || ret == -ECONNREFUSED)
			snprintf(err, err_len, "cannot reach the API at %s: %s (is 'godwit run --api %s' running?)",
				 path, strerror(-ret), path);
		else if (ret == -ETIMEDOUT)
			snprintf(err, err_len, "the API at %s did not answer within %d ms", path,
				 CLI_API_TIMEOUT_MS);
		else
			snprintf(err, err_len, "API %s: %s", path, strerror(-ret));
		return ret;
	}
	j = js_parse(text, strlen(text), perr, sizeof(perr));
	if (!json_is_object(j)) {
		snprintf(err, err_len, "API %s: malformed answer (%s): %.200s", path,
			 j ? "not an object" : perr, text);
		json_decref(j);
		free(text);
		return -EPROTO;
	}
	free(text);
	if (!js_bool(js_get(j, "ok"), false)) {
		snprintf(err, err_len, "%s", js_str(js_get(j, "error"), "request refused"));
		json_decref(j);
		return -EINVAL;
	}
	*reply = j;
	return 0;
}

bool cli_status_is(const json_t *st, enum gw_status which)
{
	const char *s = js_str(js_get(st, "status"), NULL);
	const char *name = gw_status_name(which);

	return s && name && !strcmp(s, name);
}

bool cli_status_postcopy(const json_t *st)
{
	return cli_status_is(st, GW_STATUS_POSTCOPY_ACTIVE) || cli_status_is(st, GW_STATUS_POSTCOPY_PAUSED) ||
	       cli_status_is(st, GW_STATUS_POSTCOPY_RECOVER);
}

bool cli_status_terminal(const json_t *st)
{
	const char *verify = js_str(js_get(st, "verify"), "off");

	if (!js_bool(js_get(st, "settled"), true))
		return false;
	if (cli_status_is(st, GW_STATUS_COMPLETED))
		return strcmp(verify, gw_verify_name(GW_VERIFY_PENDING)) != 0;
	return cli_status_is(st, GW_STATUS_FAILED) || cli_status_is(st, GW_STATUS_CANCELLED) ||
	       cli_status_is(st, GW_STATUS_UNKNOWN);
}

int64_t cli_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void cli_sleep_ms_interruptible(unsigned ms, volatile sig_atomic_t *counter, sig_atomic_t seen)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		if (counter && *counter != seen)
			return;
}
