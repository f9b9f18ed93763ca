/* SPDX-License-Identifier: MIT */
/*
 * Invariant: one TLS session (net/tls.c) carries a byte stream exactly,
 * whatever the sizes of the writes and however often the socket is full
 * (records gather in the send buffer, net/tls_rec.c, and a flush that
 * would block says so and finishes later), read whole or into scattered
 * parts (a record opened across them), both ways, also across key
 * updates (KeyUpdate, here every few records), and with OpenSSL's own
 * record layer at the other end (ours is TLS 1.3's, not merely symmetric); a record changed on the
 * way fails the read with -EPROTO and says so; and a write to a peer that
 * is gone fails with -ECONNRESET and a reason in words, never a SIGPIPE,
 * with SIGPIPE at its default action (a library must not kill the process
 * that embeds it) and the thread's signal mask unchanged.
 *
 * Both ends run in this thread on a socketpair, stepped in turn; PSK mode,
 * so no certificates are needed.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "net/tls.h"
#include "net/tls_int.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define STREAM_BYTES (3u << 20)

struct pair {
	struct gw_tls_ctx *cctx, *sctx;
	struct gw_tls *client, *server;
	int fds[2];			/* [0] client, [1] server */
};

static uint8_t pattern_byte(size_t off)
{
	return (uint8_t)(off * 2654435761u >> 13);
}

/* @openssl_server: the server leaves its records to OpenSSL (the two record layers talk). */
static void pair_open_with(struct pair *p, const char *psk_path, bool openssl_server)
{
	struct gw_tls_config cfg = { 0 };
	char why[400];
	bool cdone = false, sdone = false;

	snprintf(cfg.psk_file, sizeof(cfg.psk_file), "%s", psk_path);
	p->cctx = gw_tls_ctx_new(GW_TLS_CLIENT, &cfg, why, sizeof(why));
	TEST_ASSERT(p->cctx, "client context: %s", why);
	p->sctx = gw_tls_ctx_new(GW_TLS_SERVER, &cfg, why, sizeof(why));
	TEST_ASSERT(p->sctx, "server context: %s", why);
	p->sctx->openssl_records = openssl_server;
	TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fds) == 0, "socketpair");
	p->client = gw_tls_new(p->cctx, p->fds[0], "peer.test", why, sizeof(why));
	TEST_ASSERT(p->client, "client session: %s", why);
	p->server = gw_tls_new(p->sctx, p->fds[1], NULL, why, sizeof(why));
	TEST_ASSERT(p->server, "server session: %s", why);
	for (int i = 0; i < 1000 && !(cdone && sdone); i++) {
		short ev = 0;
		int r;

		if (!cdone) {
			r = gw_tls_handshake(p->client, &ev);
			TEST_ASSERT(r == 0 || r == -EAGAIN, "client handshake: %s", gw_tls_error(p->client));
			cdone = r == 0;
		}
		if (!sdone) {
			r = gw_tls_handshake(p->server, &ev);
			TEST_ASSERT(r == 0 || r == -EAGAIN, "server handshake: %s", gw_tls_error(p->server));
			sdone = r == 0;
		}
	}
	TEST_ASSERT(cdone && sdone, "handshake never finished");
}

static void pair_open(struct pair *p, const char *psk_path)
{
	pair_open_with(p, psk_path, false);
}

static void pair_close(struct pair *p)
{
	gw_tls_free(p->client);
	gw_tls_free(p->server);
	if (p->fds[0] >= 0)
		close(p->fds[0]);
	if (p->fds[1] >= 0)
		close(p->fds[1]);
	gw_tls_ctx_free(p->cctx);
	gw_tls_ctx_free(p->sctx);
}

/* Drain what the server can read now into @got at *@off, by turns whole and into scattered parts. */
static void server_read(struct pair *p, uint8_t *got, size_t *off)
{
	static unsigned nr_calls;

	for (;;) {
		short ev = 0;
		size_t want = STREAM_BYTES - *off < 50000 ? STREAM_BYTES - *off : 50000;
		ssize_t n;

		if (!want)
			return;
		if (++nr_calls % 2) {
			n = gw_tls_read(p->server, got + *off, want, &ev);
		} else {	/* records opened across parts, an empty one among them */
			struct iovec iov[4] = { { got + *off, want / 3 }, { got + *off + want / 3, 0 },
						{ got + *off + want / 3, want / 5 },
						{ got + *off + want / 3 + want / 5, want - want / 3 - want / 5 } };

			n = gw_tls_readv(p->server, iov, 4, &ev);
		}
		if (n == -EAGAIN)
			return;
		TEST_ASSERT(n > 0, "server read: %zd %s", n, gw_tls_error(p->server));
		*off += (size_t)n;
	}
}

/* The server answers @len bytes, read by the client whole. */
static void test_reply(struct pair *p, size_t len)
{
	uint8_t *src = malloc(len), *got = calloc(1, len);
	size_t woff = 0, roff = 0;

	TEST_ASSERT(src && got, "buffers");
	for (size_t i = 0; i < len; i++)
		src[i] = pattern_byte(i + 7);
	for (int i = 0; i < 100000 && roff < len; i++) {
		short ev = 0;
		ssize_t n;

		if (woff < len) {
			n = gw_tls_write(p->server, src + woff, len - woff, &ev);
			TEST_ASSERT(n > 0 || n == -EAGAIN, "server write: %zd %s", n, gw_tls_error(p->server));
			woff += n > 0 ? (size_t)n : 0;
		} else {
			(void)gw_tls_flush(p->server, &ev);
		}
		n = gw_tls_read(p->client, got + roff, len - roff, &ev);
		TEST_ASSERT(n > 0 || n == -EAGAIN, "client read: %zd %s", n, gw_tls_error(p->client));
		roff += n > 0 ? (size_t)n : 0;
	}
	TEST_CHECK(roff == len && !memcmp(src, got, len), "the reply arrived changed or short (%zu of %zu)", roff, len);
	free(src);
	free(got);
}

/*
 * Writes of 1 byte to 70000 bytes, flushed now and then, the reader stepped
 * whenever the socket is full; the write key updated every @rekey records
 * (0: never, as a migration's 2^24 records do not come here).
 */
static void test_stream(const char *psk, uint64_t rekey, bool openssl_server)
{
	struct pair p;
	uint8_t *src = malloc(STREAM_BYTES), *got = calloc(1, STREAM_BYTES);
	size_t woff = 0, roff = 0, nr_writes = 0, nr_full = 0;
	unsigned seed = 12345;

	TEST_ASSERT(src && got, "buffers");
	for (size_t i = 0; i < STREAM_BYTES; i++)
		src[i] = pattern_byte(i);
	pair_open_with(&p, psk, openssl_server);
	TEST_CHECK(gw_tls_buffered(p.client) && gw_tls_buffered(p.server),
		   "writes do not go through the send buffer after the handshake");
	TEST_CHECK(gw_tls_own_records(p.client) && gw_tls_own_records(p.server) == !openssl_server,
		   "the records are not ours after the handshake (net/tls_rec.c)");
	if (rekey) {
		gw_tls_set_rekey_records(p.client, rekey);
		gw_tls_set_rekey_records(p.server, rekey);
	}
	while (woff < STREAM_BYTES) {
		size_t len = (seed = seed * 1103515245u + 12345u) % 70000 + 1;
		short ev = 0;
		ssize_t n;

		if (len > STREAM_BYTES - woff)
			len = STREAM_BYTES - woff;
		if (nr_writes % 3 == 1) {	/* parts, an empty one inside a record among them */
			struct iovec iov[3] = { { src + woff, len / 2 }, { src + woff, 0 },
						{ src + woff + len / 2, len - len / 2 } };

			n = gw_tls_writev(p.client, iov, 3, &ev);
		} else {
			n = gw_tls_write(p.client, src + woff, len, &ev);
		}
		if (n == -EAGAIN) {
			nr_full++;
			server_read(&p, got, &roff);
			continue;
		}
		TEST_ASSERT(n > 0, "client write: %zd %s", n, gw_tls_error(p.client));
		woff += (size_t)n;
		if (++nr_writes % 7 == 0) {
			while (gw_tls_flush(p.client, &ev) == -EAGAIN) {
				nr_full++;
				server_read(&p, got, &roff);
			}
		}
	}
	for (int i = 0; i < 100000 && roff < STREAM_BYTES; i++) {
		short ev = 0;

		if (gw_tls_flush(p.client, &ev) == -EAGAIN)
			nr_full++;
		server_read(&p, got, &roff);
	}
	TEST_CHECK(roff == STREAM_BYTES, "server read %zu of %u bytes", roff, STREAM_BYTES);
	TEST_CHECK(!memcmp(src, got, STREAM_BYTES), "the stream arrived changed");
	TEST_CHECK(nr_full > 0, "the socket never filled: the retry paths were not exercised");
	test_reply(&p, 300000);
	printf("stream: %u bytes in %zu writes, the socket full %zu times, a key update every %llu records, "
	       "server's records by %s, arrived intact\n", STREAM_BYTES, nr_writes, nr_full,
	       (unsigned long long)rekey, openssl_server ? "OpenSSL" : "tls_rec.c");
	pair_close(&p);
	free(src);
	free(got);
}

/* One byte of a record flipped on the way: the read fails, and says why. */
static void test_tampered(const char *psk)
{
	uint8_t msg[3000], raw[4096], got[3000];
	struct pair p;
	short ev = 0;
	ssize_t n, raw_len;

	memset(msg, 0x5a, sizeof(msg));
	pair_open(&p, psk);
	TEST_ASSERT(gw_tls_write(p.client, msg, sizeof(msg), &ev) == (ssize_t)sizeof(msg), "client write");
	TEST_ASSERT(gw_tls_flush(p.client, &ev) == 0, "client flush");
	/* Take the record off the server's socket and send it on changed (fds[0] delivers to fds[1]). */
	raw_len = read(p.fds[1], raw, sizeof(raw));
	TEST_ASSERT(raw_len > 100, "the record on the wire (%zd bytes)", raw_len);
	raw[raw_len / 2] ^= 0x01;
	TEST_ASSERT(write(p.fds[0], raw, (size_t)raw_len) == raw_len, "the changed record");
	n = gw_tls_read(p.server, got, sizeof(got), &ev);
	TEST_CHECK(n == -EPROTO, "a changed record read as %zd, not -EPROTO", n);
	TEST_CHECK(strstr(gw_tls_error(p.server), "failed its authentication") != NULL, "reason: '%s'",
		   gw_tls_error(p.server));
	TEST_CHECK(gw_tls_read(p.server, got, sizeof(got), &ev) == -EPROTO, "the failure is not sticky");
	/* The other end is told: a fatal bad_record_mac alert (RFC 8446 6.2). */
	n = gw_tls_read(p.client, got, sizeof(got), &ev);
	TEST_CHECK(n < 0 && n != -EAGAIN && strstr(gw_tls_error(p.client), "alert") != NULL,
		   "the sender was not told by an alert: %zd '%s'", n, gw_tls_error(p.client));
	printf("tampered: %s; the sender: %s\n", gw_tls_error(p.server), gw_tls_error(p.client));
	pair_close(&p);
}

static void test_peer_gone(const char *psk)
{
	static uint8_t buf[64 << 10];
	sigset_t before, after, pend;
	struct pair p;
	ssize_t n = 0;
	int r = 0;

	TEST_ASSERT(signal(SIGPIPE, SIG_DFL) != SIG_ERR, "SIGPIPE default");
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	pair_open(&p, psk);
	gw_tls_free(p.server);
	p.server = NULL;
	close(p.fds[1]);
	p.fds[1] = -1;
	/* Writes gather in the buffer until it fills or is flushed: flush each. */
	for (int i = 0; i < 64 && !r; i++) {
		short ev = 0;

		n = gw_tls_write(p.client, buf, sizeof(buf), &ev);
		if (n < 0 && n != -EAGAIN)
			break;
		r = gw_tls_flush(p.client, &ev);
		if (r == -EAGAIN)
			r = 0;
	}
	TEST_CHECK(n == -ECONNRESET || r == -ECONNRESET, "write to a closed peer: write %zd, flush %d", n, r);
	TEST_CHECK(strstr(gw_tls_error(p.client), "closed the connection") != NULL, "reason: '%s'",
		   gw_tls_error(p.client));
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	TEST_CHECK(sigismember(&before, SIGPIPE) == sigismember(&after, SIGPIPE), "signal mask changed");
	TEST_CHECK(!sigpending(&pend) && !sigismember(&pend, SIGPIPE), "a SIGPIPE is pending");
	printf("peer gone: %s (process alive, SIGPIPE at its default action)\n", gw_tls_error(p.client));
	pair_close(&p);
}

int main(void)
{
	char dir[] = "/tmp/gw-tls-session.XXXXXX", path[64];
	FILE *f;

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
	test_stream(path, 0, false);
	test_stream(path, 5, false);
	test_stream(path, 0, true);	/* our records are TLS 1.3's: OpenSSL's own record layer reads and writes them */
	test_stream(path, 5, true);
	test_tampered(path);
	test_peer_gone(path);
	unlink(path);
	rmdir(dir);
	TEST_EXIT();
}
