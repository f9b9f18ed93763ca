/* SPDX-License-Identifier: MIT */
/*
 * Invariant: every stream of the table (net/stream.h) is complete (a
 * unique name and every call), only the plain one claims MSG_ZEROCOPY and
 * descriptor passing; a connection's stream is the one its socket was
 * given (plain after gw_conn_init and gw_conn_adopt without TLS, TLS with
 * a session, plain again once closed); and through each stream, frames of
 * scattered parts (a 16-byte header, pages, a 1 MiB run, empty and one-byte
 * parts) arrive exactly and in order, a prefix-CRC frame with a counter of
 * zero-copy sends leaves that counter alone under TLS (records are
 * copies), and descriptors are refused with -EINVAL where the stream
 * cannot pass them. Both ends on a socketpair, the sender on its own
 * thread; TLS in PSK mode, so no certificates are needed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "net/io.h"
#include "net/stream.h"
#include "net/tls.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define BIG_BYTES (1u << 20)
#define FRAMES 6

static uint8_t pattern(unsigned frame, size_t off)
{
	return (uint8_t)((off + frame * 7919u) * 2654435761u >> 13);
}

static void test_table(void)
{
	unsigned n = 0;

	for (unsigned i = 0; gw_streams[i]; i++, n++) {
		const struct gw_stream_ops *o = gw_streams[i];

		TEST_CHECK(o->name && o->name[0], "stream %u has no name", i);
		TEST_CHECK(o->send && o->recv && o->pending && o->set_timeout && o->shutdown && o->close && o->error,
			   "%s: calls incomplete", o->name);
		for (unsigned j = 0; j < i; j++)
			TEST_CHECK(strcmp(gw_streams[j]->name, o->name), "%s: name twice", o->name);
	}
	TEST_CHECK(n == 2, "plain, tls: %u streams", n);
	TEST_CHECK(gw_stream_plain.zerocopy && gw_stream_plain.fds, "plain: zero-copy and descriptors");
	TEST_CHECK(!gw_stream_tls.zerocopy && !gw_stream_tls.fds, "tls: no zero-copy, no descriptors");
}

/* The parts of frame @k: their sizes vary with it. */
static int frame_parts(unsigned k, uint8_t *buf, struct iovec *iov)
{
	static const size_t sizes[] = { 16, 0, 4096, 1, BIG_BYTES, 3, 8192 + 5 };
	size_t off = 0;
	int n = 0;

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = (i + k) % 3 == 0 && sizes[i] > 16 ? sizes[i] / 2 : sizes[i];

		iov[n++] = (struct iovec){ buf + off, len };
		for (size_t j = 0; j < len; j++, off++)
			buf[off] = pattern(k, off);
	}
	return n;
}

struct sender {
	struct gw_conn *c;
	int ret;
	uint32_t zc_calls;
};

static void *send_main(void *arg)
{
	struct sender *sd = arg;
	uint8_t *buf = malloc(2 * BIG_BYTES);
	struct iovec iov[8];

	sd->ret = buf ? 0 : -ENOMEM;
	for (unsigned k = 0; !sd->ret && k < FRAMES; k++) {
		int n = frame_parts(k, buf, iov);

		/* Every other frame as PAGES with its CRC over the first parts, zero-copy asked for. */
		sd->ret = k % 2 ? gw_conn_send_prefix_crc(sd->c, GW_MSG_PAGES, iov, n, 1, &sd->zc_calls, NULL) :
				  gw_conn_send(sd->c, GW_MSG_STATE, iov, n, NULL, 0);
	}
	free(buf);
	return NULL;
}

/* FRAMES frames from @a to @b, checked byte by byte. */
static void round_trip(const char *name, struct gw_conn *a, struct gw_conn *b)
{
	uint8_t *buf = malloc(2 * BIG_BYTES);
	struct sender sd = { .c = a };
	pthread_t t;

	TEST_ASSERT(buf, "buffer");
	TEST_ASSERT(pthread_create(&t, NULL, send_main, &sd) == 0, "sender");
	for (unsigned k = 0; k < FRAMES; k++) {
		struct gw_frame_hdr h;
		size_t bad = SIZE_MAX;
		uint32_t crc;
		int ret = gw_conn_recv_hdr(b, &h, &crc);

		if (!ret) {
			struct iovec iov = { buf, h.len };

			TEST_CHECK(h.len <= 2 * BIG_BYTES, "%s: frame %u of %u bytes", name, k, h.len);
			ret = gw_conn_recv_iov(b, &iov, 1, NULL);
		}
		TEST_CHECK(!ret, "%s: frame %u: %s %s", name, k, strerror(-ret), gw_conn_tls_error(b));
		if (ret)
			break;
		TEST_CHECK(h.type == (k % 2 ? GW_MSG_PAGES : GW_MSG_STATE), "%s: frame %u type %u", name, k, h.type);
		for (size_t j = 0; j < h.len && bad == SIZE_MAX; j++)
			if (buf[j] != pattern(k, j))
				bad = j;
		TEST_CHECK(bad == SIZE_MAX, "%s: frame %u differs at byte %zu of %u", name, k, bad, h.len);
	}
	pthread_join(t, NULL);
	TEST_CHECK(!sd.ret, "%s: send: %s", name, strerror(-sd.ret));
	if (a->stream == &gw_stream_tls)
		TEST_CHECK(sd.zc_calls == 0, "%s: %u zero-copy sends under TLS", name, sd.zc_calls);
	free(buf);
}

static void test_plain(void)
{
	struct gw_conn a, b;
	int fds[2];

	TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
	gw_conn_init(&a, -1);
	gw_conn_init(&b, -1);
	TEST_CHECK(a.stream == &gw_stream_plain, "plain after init");
	gw_conn_adopt(&a, fds[0], NULL, NULL, 0);
	gw_conn_set_fd(&b, fds[1], NULL);
	TEST_CHECK(a.stream == &gw_stream_plain && b.stream == &gw_stream_plain, "plain after adopt");
	TEST_CHECK(gw_conn_set_timeout(&a, 10000) == 0 && gw_conn_set_timeout(&b, 10000) == 0, "timeouts");
	round_trip("plain", &a, &b);
	TEST_CHECK(!strcmp(gw_conn_tls_error(&a), ""), "plain: no TLS error text");
	gw_conn_close(&a);
	gw_conn_close(&b);
}

/* Both handshakes stepped in this thread, then each session adopted by a connection. */
static void test_tls(const char *psk)
{
	struct gw_tls_config cfg = { 0 };
	struct gw_tls_ctx *cctx, *sctx;
	struct gw_tls *ct, *st;
	struct gw_conn a, b;
	bool cdone = false, sdone = false;
	char why[400];
	int fds[2], one = 0;

	snprintf(cfg.psk_file, sizeof(cfg.psk_file), "%s", psk);
	cctx = gw_tls_ctx_new(GW_TLS_CLIENT, &cfg, why, sizeof(why));
	TEST_ASSERT(cctx, "client context: %s", why);
	sctx = gw_tls_ctx_new(GW_TLS_SERVER, &cfg, why, sizeof(why));
	TEST_ASSERT(sctx, "server context: %s", why);
	TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
	ct = gw_tls_new(cctx, fds[0], "peer.test", why, sizeof(why));
	st = gw_tls_new(sctx, fds[1], NULL, why, sizeof(why));
	TEST_ASSERT(ct && st, "sessions: %s", why);
	for (int i = 0; i < 1000 && !(cdone && sdone); i++) {
		short ev = 0;
		int r;

		if (!cdone && (r = gw_tls_handshake(ct, &ev)) != -EAGAIN)
			TEST_ASSERT(!r && (cdone = true), "client handshake: %s", gw_tls_error(ct));
		if (!sdone && (r = gw_tls_handshake(st, &ev)) != -EAGAIN)
			TEST_ASSERT(!r && (sdone = true), "server handshake: %s", gw_tls_error(st));
	}
	TEST_ASSERT(cdone && sdone, "handshake never finished");
	gw_conn_init(&a, -1);
	gw_conn_init(&b, -1);
	gw_conn_adopt(&a, fds[0], NULL, ct, 0);
	gw_conn_adopt(&b, fds[1], NULL, st, 0);
	TEST_CHECK(a.stream == &gw_stream_tls && b.stream == &gw_stream_tls && a.tls == ct, "TLS after adopt");
	TEST_CHECK(gw_conn_set_timeout(&a, 10000) == 0 && gw_conn_set_timeout(&b, 10000) == 0, "timeouts");
	TEST_CHECK(gw_conn_send(&a, GW_MSG_GO, NULL, 0, &one, 1) == -EINVAL, "tls: descriptors refused");
	round_trip("tls", &a, &b);
	gw_conn_close(&a);
	gw_conn_close(&b);
	TEST_CHECK(a.stream == &gw_stream_plain && !a.tls && a.fd == -1, "plain again once closed");
	gw_tls_ctx_free(cctx);
	gw_tls_ctx_free(sctx);
}

int main(void)
{
	char dir[] = "/tmp/gw-stream.XXXXXX", path[64];
	FILE *f;

	test_table();
	test_plain();
	TEST_ASSERT(mkdtemp(dir), "temporary directory");
	snprintf(path, sizeof(path), "%s/keys.psk", dir);
	f = fopen(path, "w");
	TEST_ASSERT(f, "keys file");
	fprintf(f, "src.test:");
	for (int i = 0; i < 32; i++)
		fprintf(f, "%02x", (unsigned)(i * 37 + 11) & 0xff);
	fprintf(f, "\n");
	fclose(f);
	TEST_ASSERT(chmod(path, 0600) == 0, "keys file mode");
	test_tls(path);
	unlink(path);
	rmdir(dir);
	TEST_EXIT();
}
