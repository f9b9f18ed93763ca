/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a URL is checked before anything resolves, connects or
 * listens, and a bad one is refused with a reason naming what is wrong:
 * tcp ports are numbers in 1..65535 (0 only to listen), an IPv6 address is
 * in brackets, a host is needed to connect; unix paths are 1..107 bytes;
 * the scheme is one of the transport table. The host TLS checks a
 * certificate against is the URL's, without brackets.
 */
#include <string.h>
#include "net/transport.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

struct ucase {
	const char *url;
	int connect_ok, listen_ok;
	const char *why;		/* words of the refusal (connect) */
};

static const struct ucase cases[] = {
	{ "tcp:127.0.0.1:4444", 1, 1, NULL },
	{ "tcp:localhost:1", 1, 1, NULL },
	{ "tcp:host.example:65535", 1, 1, NULL },
	{ "tcp:[::1]:4444", 1, 1, NULL },
	{ "tcp:[fe80::1%eth0]:4444", 1, 1, NULL },
	{ "tcp:127.0.0.1:0", 0, 1, "port '0' is not a number in 1..65535" },
	{ "tcp::4444", 0, 1, "no host" },
	{ "tcp:127.0.0.1:65536", 0, 0, "port '65536'" },
	{ "tcp:127.0.0.1:-1", 0, 0, "port '-1'" },
	{ "tcp:127.0.0.1:44a", 0, 0, "port '44a'" },
	{ "tcp:127.0.0.1:", 0, 0, "expected tcp:HOST:PORT" },
	{ "tcp:127.0.0.1", 0, 0, "expected tcp:HOST:PORT" },
	{ "tcp:::1:4444", 0, 0, "IPv6 address goes in brackets" },
	{ "tcp:[::1]4444", 0, 0, "IPv6 address goes in brackets" },
	{ "tcp:[::1:4444", 0, 0, "brackets" },
	{ "unix:/tmp/x.sock", 1, 1, NULL },
	{ "unix:", 0, 0, "empty or too long" },
	{ "rdma2:host:1", 0, 0, "unknown transport" },
	{ "nothing", 0, 0, "is not SCHEME:ADDRESS" },
};

int main(void)
{
	char longpath[200], why[256];
	struct gw_url u;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct ucase *c = &cases[i];
		int ret;

		why[0] = 0;
		ret = gw_url_parse(c->url, &u, why, sizeof(why));
		TEST_CHECK((ret == 0) == c->connect_ok, "%s: connect parse %d (%s)", c->url, ret, why);
		if (ret && c->why)
			TEST_CHECK(strstr(why, c->why) != NULL, "%s: reason '%s', expected '%s'", c->url, why, c->why);
		printf("%-28s connect %-3s listen %-3s %s\n", c->url, c->connect_ok ? "ok" : "no",
		       c->listen_ok ? "ok" : "no", c->connect_ok ? "" : why);
		ret = gw_url_parse_listen(c->url, &u, why, sizeof(why));
		TEST_CHECK((ret == 0) == c->listen_ok, "%s: listen parse %d (%s)", c->url, ret, why);
	}
	memset(longpath, 'p', sizeof(longpath));
	memcpy(longpath, "unix:/", 6);
	longpath[5 + 108] = 0;	/* a 108-byte path: one too many for sun_path */
	TEST_CHECK(gw_url_parse(longpath, &u, why, sizeof(why)) && strstr(why, "1..107 bytes"),
		   "a 108-byte unix path: %s", why);
	longpath[5 + 107] = 0;
	TEST_CHECK(!gw_url_parse(longpath, &u, why, sizeof(why)), "a 107-byte unix path: %s", why);

	TEST_ASSERT(!gw_url_parse("tcp:[::1]:4444", &u, why, sizeof(why)), "parse");
	gw_url_host(&u, why, sizeof(why));
	TEST_CHECK(!strcmp(why, "::1"), "host of tcp:[::1]:4444 is '%s'", why);
	TEST_ASSERT(!gw_url_parse("tcp:dst.example:1", &u, why, sizeof(why)), "parse");
	gw_url_host(&u, why, sizeof(why));
	TEST_CHECK(!strcmp(why, "dst.example"), "host '%s'", why);
	TEST_ASSERT(!gw_url_parse("unix:/tmp/a", &u, why, sizeof(why)), "parse");
	gw_url_host(&u, why, sizeof(why));
	TEST_CHECK(!why[0], "a unix URL names no host: '%s'", why);
	TEST_EXIT();
}
