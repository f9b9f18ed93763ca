// SPDX-License-Identifier: MIT
/*
 * Invariant: the control socket answers every request with exactly one
 * line of JSON and closes; requests are split into a command and key=value
 * pairs, or read as one JSON object {"command":...} with the same meaning;
 * malformed ones are refused with {"ok":false,...} without reaching the
 * handler; a handler may keep the connection and stream lines on it; the
 * socket is mode 0600; a stale socket file is replaced, a live one or a
 * non-socket file is not; stopping removes the socket. Silent clients,
 * more than the server's slots, never keep a request out: the oldest are
 * evicted (closed) and the request is answered.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/api.h"
#include "common/json.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static int calls;

static json_t *handler(void *opaque, const struct api_request *req, int fd)
{
	json_t *o = api_ok(), *args = json_object();
	unsigned i;

	(void)opaque;
	calls++;
	if (!strcmp(req->cmd, "stream")) {
		/* Keep the connection: the answer, then two lines, then close. */
		js_set_str(o, "stream", "test");
		api_send_json(fd, o);
		api_send_json(fd, o);
		api_send_json(fd, o);
		json_decref(o);
		json_decref(args);
		close(fd);
		return NULL;
	}
	js_set_str(o, "cmd", req->cmd);
	for (i = 0; i < req->nr_args; i++)
		js_set_str(args, req->args[i].key, req->args[i].value);
	json_object_set_new(o, "args", args);
	return o;
}

static json_t *call(const char *path, const char *line)
{
	char *reply = NULL, err[128];
	json_t *v;
	int r = api_call(path, line, &reply, 5000);

	TEST_ASSERT(r == 0, "api_call('%.60s') = %d", line, r);
	TEST_ASSERT(!strchr(reply, '\n'), "reply has more than one line: %s", reply);
	v = js_parse(reply, strlen(reply), err, sizeof(err));
	TEST_ASSERT(v, "reply not JSON (%s): %s", err, reply);
	free(reply);
	return v;
}

int main(void)
{
	char dir[] = "/tmp/gw-test-api.XXXXXX", path[128], file[128], err[256];
	struct api_request req;
	struct api_server *srv, *srv2;
	json_t *v;
	const char line[] = "migrate url=tcp:1.2.3.4:5 channels=4  compress=zstd\n";
	const char bad[] = "set channels";
	struct stat st;
	char *reply;
	int fd;

	/* Parsing alone. */
	TEST_ASSERT(!api_parse_request(line, &req, err, sizeof(err)), "parse: %s", err);
	TEST_CHECK(!strcmp(req.cmd, "migrate") && req.nr_args == 3, "cmd %s args %u", req.cmd,
		   req.nr_args);
	TEST_CHECK(!strcmp(api_arg(&req, "url"), "tcp:1.2.3.4:5"), "url");
	TEST_CHECK(!strcmp(api_arg(&req, "compress"), "zstd"), "compress");
	TEST_CHECK(api_arg(&req, "nope") == NULL, "missing arg");
	TEST_CHECK(api_parse_request(bad, &req, err, sizeof(err)) == -EINVAL, "no '=' accepted");
	TEST_ASSERT(!api_parse_request("{\"command\":\"migrate\",\"url\":\"unix:/x y\",\"channels\":4,"
				       "\"verify\":false}", &req, err, sizeof(err)), "JSON: %s", err);
	TEST_CHECK(!strcmp(req.cmd, "migrate") && req.nr_args == 3, "JSON cmd %s args %u", req.cmd,
		   req.nr_args);
	TEST_CHECK(!strcmp(api_arg(&req, "url"), "unix:/x y") && !strcmp(api_arg(&req, "channels"), "4") &&
		   !strcmp(api_arg(&req, "verify"), "no"), "JSON values as words");
	TEST_CHECK(api_parse_request("{\"url\":\"x\"}", &req, err, sizeof(err)) == -EINVAL,
		   "JSON without command accepted");
	TEST_CHECK(api_parse_request("{\"command\":\"set\",\"a\":[1]}", &req, err, sizeof(err)) == -EINVAL,
		   "JSON array value accepted");
	TEST_CHECK(api_parse_request("{\"command\":", &req, err, sizeof(err)) == -EINVAL,
		   "truncated JSON accepted");

	TEST_ASSERT(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	snprintf(file, sizeof(file), "%s/plain", dir);

	/* A stale socket (bound, nobody listening) is replaced. */
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		strcpy(sa.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		TEST_ASSERT(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)), "stale bind");
		close(fd);
	}
	srv = api_server_start(path, handler, NULL, err, sizeof(err));
	TEST_ASSERT(srv, "start over a stale socket: %s", err);
	TEST_ASSERT(!stat(path, &st), "stat socket");
	TEST_CHECK((st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);

	/* A live one is not. */
	srv2 = api_server_start(path, handler, NULL, err, sizeof(err));
	TEST_CHECK(!srv2 && errno == EADDRINUSE, "second server on a live socket: %s", err);
	api_server_stop(srv2);

	v = call(path, "status");
	TEST_CHECK(js_bool(js_get(v, "ok"), false), "status ok");
	TEST_CHECK(!strcmp(js_str(js_get(v, "cmd"), ""), "status"), "cmd");
	json_decref(v);

	v = call(path, "set max-bandwidth-bps=100M downtime-limit-us=300000");
	TEST_CHECK(!strcmp(js_path_str(v, "args.max-bandwidth-bps", ""), "100M"), "arg 1");
	TEST_CHECK(!strcmp(js_path_str(v, "args.downtime-limit-us", ""), "300000"), "arg 2");
	json_decref(v);

	v = call(path, "{\"command\":\"set\",\"channels\":2}");
	TEST_CHECK(!strcmp(js_path_str(v, "args.channels", ""), "2"), "JSON request");
	json_decref(v);

	/* A stream: the handler keeps the connection and writes lines. */
	fd = api_open_stream(path, "stream");
	TEST_ASSERT(fd >= 0, "api_open_stream: %d", fd);
	{
		char sbuf[512];
		size_t got = 0;
		ssize_t n;
		int lines = 0;

		while ((n = recv(fd, sbuf + got, sizeof(sbuf) - 1 - got, 0)) > 0)
			got += (size_t)n;
		sbuf[got] = '\0';
		for (char *p = sbuf; (p = strchr(p, '\n')); p++)
			lines++;
		TEST_CHECK(lines == 3, "stream gave %d lines: %s", lines, sbuf);
		close(fd);
	}

	/* 20 silent clients (16 slots): a request is still answered, the oldest silent ones closed. */
	{
		int silent[20];
		char c;

		for (unsigned i = 0; i < 20; i++) {
			struct sockaddr_un sa = { .sun_family = AF_UNIX };

			silent[i] = socket(AF_UNIX, SOCK_STREAM, 0);
			strcpy(sa.sun_path, path);
			TEST_ASSERT(silent[i] >= 0 && !connect(silent[i], (struct sockaddr *)&sa, sizeof(sa)), "connect");
		}
		v = call(path, "status");
		TEST_CHECK(js_bool(js_get(v, "ok"), false), "status beside 20 silent clients");
		json_decref(v);
		TEST_CHECK(recv(silent[0], &c, 1, 0) == 0, "the oldest silent client was not evicted");
		for (unsigned i = 0; i < 20; i++)
			close(silent[i]);
	}

	/* Malformed requests never reach the handler. */
	calls = 0;
	v = call(path, "set =1");
	TEST_CHECK(!js_bool(js_get(v, "ok"), true) && js_get(v, "error"), "bad arg refused");
	json_decref(v);
	v = call(path, "   ");
	TEST_CHECK(!js_bool(js_get(v, "ok"), true), "empty request refused");
	json_decref(v);
	v = call(path, "{\"command\":\"x\",");
	TEST_CHECK(!js_bool(js_get(v, "ok"), true), "malformed JSON refused");
	json_decref(v);
	{
		char *big = malloc(API_LINE_MAX + 100);

		memset(big, 'a', API_LINE_MAX + 99);
		big[API_LINE_MAX + 99] = '\0';
		v = call(path, big);
		TEST_CHECK(!js_bool(js_get(v, "ok"), true), "overlong request refused");
		json_decref(v);
		free(big);
	}
	TEST_CHECK(calls == 0, "handler called %d times for malformed requests", calls);
	TEST_CHECK(api_call(path, "a\nb", &reply, 1000) == -EINVAL, "newline in request");

	api_server_stop(srv);
	TEST_CHECK(access(path, F_OK) && errno == ENOENT, "socket left behind");
	TEST_CHECK(api_call(path, "status", &reply, 1000) == -ENOENT, "call after stop");

	/* A plain file is never deleted. */
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	TEST_ASSERT(fd >= 0, "create file");
	close(fd);
	srv = api_server_start(file, handler, NULL, err, sizeof(err));
	TEST_CHECK(!srv && !access(file, F_OK), "server replaced a plain file");
	api_server_stop(srv);
	unlink(file);
	rmdir(dir);
	TEST_EXIT();
}
