/* SPDX-License-Identifier: MIT */
/*
 * Invariant: every transport of the table is complete (scheme, listen,
 * connect, unlisten, and the calls that drive its sockets), and a URL
 * picks it by scheme; rdma:HOST:PORT parses like tcp:, and where no RDMA
 * device exists (this build machine) both a destination and a source are
 * refused before anything starts, with a reason that says so. A PAGES
 * frame sent with its CRC over the prefix only arrives intact, its CRC
 * checked before the data area, and its data area is not covered by that
 * CRC (the page CRCs cover it). MSG_ZEROCOPY sends over kernel TCP complete:
 * every send id is reported once, in whatever order and grouping the
 * kernel reports them, and nothing is counted twice or beyond what was sent.
 * unix:PATH never blocks on what is at PATH: a listener that never accepts
 * (its backlog full) is refused as in use, a stale socket is replaced, and
 * unlisten removes only the socket file listen made, never a file that
 * replaced it.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "net/io.h"
#include "net/transport.h"
#include "net/zerocopy.h"
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

static void test_table(void)
{
	unsigned n = 0;

	for (unsigned i = 0; gw_transports[i]; i++, n++) {
		const struct gw_transport_ops *t = gw_transports[i];
		const struct gw_sock_ops *k = t->sock;

		TEST_CHECK(t->scheme && t->listen && t->connect && t->unlisten, "transport %u incomplete", i);
		TEST_CHECK(k && k->sendmsg && k->recvmsg && k->shutdown && k->close && k->setsockopt &&
			   k->poll && k->accept, "%s: socket calls incomplete", t->scheme);
		TEST_CHECK(!t->can_pass_fds || k->kernel, "%s: fd passing needs kernel sockets", t->scheme);
	}
	TEST_CHECK(n == 3, "tcp, unix, rdma: %u transports", n);
}

static void test_urls(void)
{
	static const struct { const char *url, *scheme, *addr; } ok[] = {
		{ "tcp:127.0.0.1:4444", "tcp", "127.0.0.1:4444" },
		{ "unix:/tmp/x.sock", "unix", "/tmp/x.sock" },
		{ "rdma:10.0.0.2:4444", "rdma", "10.0.0.2:4444" },
		{ "rdma:[fe80::1]:7", "rdma", "[fe80::1]:7" },
	};
	static const char *const bad[] = { "rdma:", "rdma", "ib:1.2.3.4:5", "tcp" };
	struct gw_url u;
	char why[200];

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		TEST_CHECK(gw_url_parse(ok[i].url, &u, why, sizeof(why)) == 0 && !strcmp(u.ops->scheme, ok[i].scheme) &&
			   !strcmp(u.addr, ok[i].addr), "%s: %s", ok[i].url, why);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		TEST_CHECK(gw_url_parse(bad[i], &u, why, sizeof(why)) == -EINVAL && why[0], "%s accepted", bad[i]);
	/* HOST:PORT is checked when the address is resolved. */
	{
		struct addrinfo *res;

		TEST_CHECK(gw_addr_resolve("10.0.0.2", false, &res) == -EINVAL, "no port");
		TEST_CHECK(gw_addr_resolve("[::1:7", false, &res) == -EINVAL, "unclosed bracket");
		int ret = gw_addr_resolve("127.0.0.1:4444", false, &res);

		TEST_CHECK(ret == 0, "numeric");
		if (!ret)
			freeaddrinfo(res);
	}
}

/* rdma: refused with its reason on both sides where no device exists. */
static void test_rdma_refusal(void)
{
	const struct gw_transport_ops *t = NULL;
	struct test_ram ram;
	struct gw_vm_info vm;
	struct gw_session *s;
	char why[300] = "", err[256];
	int ret;

	for (unsigned i = 0; gw_transports[i]; i++)
		if (!strcmp(gw_transports[i]->scheme, "rdma"))
			t = gw_transports[i];
	TEST_ASSERT(t && t->usable, "rdma transport with a usability check");
	ret = t->usable(why, sizeof(why));
	if (!ret) {
		printf("an RDMA device exists here: refusal not tested\n");
		return;
	}
	TEST_CHECK(ret == -ENODEV && strstr(why, "RDMA device"), "usable: %d %s", ret, why);
	TEST_ASSERT(test_ram_create(&ram, "rdma", 1 << 20, 0) == 0, "RAM");
	test_vm_info_one(&vm, &ram, "ram0");
	s = gw_session_new(GW_ROLE_DEST, &vm, &test_vm_ops, NULL);
	TEST_ASSERT(s, "destination session");
	ret = gw_incoming_start(s, "rdma:127.0.0.1:0");
	gw_session_error(s, err, sizeof(err));
	TEST_CHECK(ret == -ENODEV && strstr(err, "RDMA device"), "destination: %d %s", ret, err);
	gw_session_free(s);
	s = gw_session_new(GW_ROLE_SOURCE, &vm, &test_vm_ops, NULL);
	TEST_ASSERT(s, "source session");
	ret = gw_migrate_start(s, "rdma:127.0.0.1:4444");
	gw_session_error(s, err, sizeof(err));
	TEST_CHECK(ret == -EINVAL && strstr(err, "RDMA device"), "source: %d %s", ret, err);
	gw_session_free(s);
	test_ram_destroy(&ram);
}

/* A listener at @path with a backlog of 0 that never accepts, filled up. */
static int held_listener(const char *path, int *conns, unsigned nr)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	TEST_ASSERT(l >= 0 && !bind(l, (struct sockaddr *)&sun, sizeof(sun)) && !listen(l, 0), "listen %s", path);
	for (unsigned i = 0; i < nr; i++) {
		conns[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		TEST_ASSERT(conns[i] >= 0, "socket");
		(void)connect(conns[i], (struct sockaddr *)&sun, sizeof(sun));	/* the later ones: EAGAIN */
	}
	return l;
}

static void test_unix_paths(void)
{
	char dir[] = "/tmp/gw-tr.XXXXXX", path[64], bound[GW_URL_MAX], why[200];
	int conns[4], l, fd;
	struct gw_url u;
	struct stat st;
	FILE *f;

	TEST_ASSERT(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/m.sock", dir);
	snprintf(bound, sizeof(bound), "unix:%s", path);
	TEST_ASSERT(!gw_url_parse_listen(bound, &u, why, sizeof(why)), "%s", why);
	/* Held: refused at once as in use, whatever the backlog (a blocking probe would hang here). */
	l = held_listener(path, conns, 4);
	fd = u.ops->listen(u.addr, bound, sizeof(bound), &u.lid);
	TEST_CHECK(fd == -EADDRINUSE, "listen over a held socket: %d", fd);
	TEST_CHECK(!lstat(path, &st) && S_ISSOCK(st.st_mode), "the held socket was removed");
	close(l);
	for (unsigned i = 0; i < 4; i++)
		close(conns[i]);
	/* Stale (its listener gone): replaced. */
	fd = u.ops->listen(u.addr, bound, sizeof(bound), &u.lid);
	TEST_ASSERT(fd >= 0, "listen over a stale socket: %d", fd);
	close(fd);
	/* Replaced by a file after we listened: unlisten leaves it. */
	TEST_ASSERT(!unlink(path) && (f = fopen(path, "w")) && fputs("precious", f) >= 0 && !fclose(f), "replace");
	u.ops->unlisten(u.addr, &u.lid);
	TEST_CHECK(!lstat(path, &st) && S_ISREG(st.st_mode), "unlisten removed a file that replaced the socket");
	unlink(path);
	/* Our own socket: removed. */
	fd = u.ops->listen(u.addr, bound, sizeof(bound), &u.lid);
	TEST_ASSERT(fd >= 0, "listen: %d", fd);
	close(fd);
	u.ops->unlisten(u.addr, &u.lid);
	TEST_CHECK(lstat(path, &st) && errno == ENOENT, "unlisten left its own socket");
	rmdir(dir);
}

/* A connected pair of loopback TCP sockets. */
static void tcp_pair(int *a, int *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	TEST_ASSERT(l >= 0 && !bind(l, (struct sockaddr *)&sin, sizeof(sin)) && !listen(l, 1) &&
		    !getsockname(l, (struct sockaddr *)&sin, &sl), "listen");
	*a = socket(AF_INET, SOCK_STREAM, 0);
	TEST_ASSERT(*a >= 0 && !connect(*a, (struct sockaddr *)&sin, sizeof(sin)), "connect");
	*b = accept(l, NULL, NULL);
	TEST_ASSERT(*b >= 0, "accept");
	close(l);
}

/*
 * A frame whose CRC covers the prefix only, sent zero-copy or not: the
 * receiver checks the CRC after the prefix, then reads the data area.
 */
static void send_recv_prefix(struct gw_conn *tx, struct gw_conn *rx, uint8_t *data, size_t len,
			     uint32_t *zc_calls, uint8_t flip)
{
	uint8_t prefix[64], got_prefix[64];
	uint8_t *got = malloc(len);
	struct iovec iov[2] = { { prefix, sizeof(prefix) }, { data, len } };
	struct iovec rv;
	struct gw_frame_hdr h;
	uint32_t crc, seq = 99;

	TEST_ASSERT(got, "malloc");
	for (unsigned i = 0; i < sizeof(prefix); i++)
		prefix[i] = (uint8_t)(i * 7);
	TEST_ASSERT(gw_conn_send_prefix_crc(tx, GW_MSG_PAGES, iov, 2, 1, zc_calls, &seq) == 0, "send");
	data[0] ^= flip;	/* after the send returned: zero-copy may still see it, the CRC does not care */
	TEST_ASSERT(gw_conn_recv_hdr(rx, &h, &crc) == 0 && h.len == sizeof(prefix) + len, "header");
	TEST_CHECK(h.seq == seq, "seq %u reported %u", h.seq, seq);
	rv = (struct iovec){ got_prefix, sizeof(got_prefix) };
	TEST_ASSERT(gw_conn_recv_iov(rx, &rv, 1, &crc) == 0, "prefix");
	TEST_CHECK(gw_conn_recv_check(&h, crc) == 0, "CRC over the prefix");
	TEST_CHECK(!memcmp(prefix, got_prefix, sizeof(prefix)), "prefix intact");
	rv = (struct iovec){ got, len };
	TEST_ASSERT(gw_conn_recv_iov(rx, &rv, 1, NULL) == 0, "data");
	TEST_CHECK(!memcmp(got + 1, data + 1, len - 1), "data intact");
	free(got);
}

static void test_prefix_and_zerocopy(void)
{
	struct gw_conn tx, rx;
	struct gw_zc zc = { 0 };
	size_t len = 256 << 10;
	uint8_t *data = malloc(len);
	int a, b, ret;

	TEST_ASSERT(data, "malloc");
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i ^ (i >> 9));
	tcp_pair(&a, &b);
	gw_conn_init(&tx, a);
	gw_conn_init(&rx, b);
	send_recv_prefix(&tx, &rx, data, len, NULL, 0);
	ret = gw_zc_enable(a);
	if (ret) {
		printf("MSG_ZEROCOPY not available: %s\n", strerror(-ret));
	} else {
		for (int i = 0; i < 8; i++)
			send_recv_prefix(&tx, &rx, data, len, &zc.sent, 0);
		/* Every send id completes (the receiver has read everything). */
		for (int i = 0; i < 200 && zc.done != zc.sent; i++) {
			ret = gw_zc_reap(&zc, a, 50);
			TEST_ASSERT(ret == 0 || ret == -ETIMEDOUT, "reap: %s", strerror(-ret));
		}
		TEST_CHECK(zc.sent >= 8 && zc.done == zc.sent && zc.completed == zc.sent,
			   "zero-copy: %u sent, %u done, %llu completed", zc.sent, zc.done,
			   (unsigned long long)zc.completed);
		printf("zero-copy over loopback: %llu of %llu sends copied by the kernel\n",
		       (unsigned long long)zc.copied, (unsigned long long)zc.completed);
	}
	gw_conn_close(&tx);
	gw_conn_close(&rx);
	free(data);
}

/* Completion ranges in any order and grouping: each id counted once. */
static void test_zc_window(void)
{
	struct gw_zc z = { .sent = 10 };

	gw_zc_complete(&z, 2, 3, false);
	TEST_CHECK(z.done == 0 && z.completed == 2, "ahead of 0: done %u", z.done);
	gw_zc_complete(&z, 0, 0, true);
	TEST_CHECK(z.done == 1 && z.copied == 1, "0 done: %u", z.done);
	gw_zc_complete(&z, 1, 1, false);
	TEST_CHECK(z.done == 4 && z.completed == 4, "0..3 done: %u", z.done);
	gw_zc_complete(&z, 2, 3, false);
	TEST_CHECK(z.done == 4 && z.completed == 4, "a repeated range counts nothing");
	gw_zc_complete(&z, 4, 9, true);
	TEST_CHECK(z.done == 10 && z.completed == 10 && z.copied == 7, "all: done %u copied %llu", z.done,
		   (unsigned long long)z.copied);
	/* Ids wrap at 2^32. */
	z = (struct gw_zc){ .sent = 2, .done = UINT32_MAX - 1 };
	gw_zc_complete(&z, UINT32_MAX - 1, 1, false);
	TEST_CHECK(z.done == 2 && z.completed == 4, "wrap: done %u completed %llu", z.done,
		   (unsigned long long)z.completed);
}

int main(void)
{
	test_log_quiet();
	test_table();
	test_urls();
	test_rdma_refusal();
	test_unix_paths();
	test_zc_window();
	test_prefix_and_zerocopy();
	TEST_EXIT();
}
