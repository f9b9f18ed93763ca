/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a framed connection's deadlines are per frame, not per system
 * call. A peer that begins a frame and then drips it a byte at a time, or
 * stops in the middle, gets -ETIMEDOUT once the frame timeout has passed
 * since the frame began, however often a byte arrives; over TLS the same.
 * Waiting for a frame to begin is bounded by the idle timeout, and, with a
 * progress stamp shared by a session's connections, extended for as long
 * as the session progresses. Over TLS, frames of every size arrive intact
 * both ways while one thread reads and another writes the same connection.
 * Outcomes are checked, never durations.
 *
 * TLS certificates come from tests/tls/gen-certs.sh (argv[1]); without it
 * or openssl the TLS half is skipped.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <godwit/log.h>
#include "net/io.h"
#include "net/tls.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define DRIP_GAP_US 150000	/* a byte every 150 ms */
#define FRAME_MS 600		/* the frame timeout: four bytes' worth of dripping */

struct pair {
	struct gw_conn a, b;	/* a: client (TLS), b: server */
};

static void pair_plain(struct pair *p)
{
	int sv[2];

	TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	gw_conn_init(&p->a, sv[0]);
	gw_conn_init(&p->b, sv[1]);
}

struct hs_arg {
	struct gw_tls_ctx *ctx;
	int fd;
	struct gw_tls *t;
	int ret;
};

static void *server_hs(void *arg)
{
	struct hs_arg *h = arg;
	char why[256];

	h->t = gw_tls_new(h->ctx, h->fd, NULL, why, sizeof(why));
	if (!h->t) {
		h->ret = -errno;
		return NULL;
	}
	for (;;) {
		short ev = 0;
		struct pollfd pfd = { .fd = h->fd };

		h->ret = gw_tls_handshake(h->t, &ev);
		if (h->ret != -EAGAIN)
			break;
		pfd.events = ev;
		poll(&pfd, 1, 5000);
	}
	return NULL;
}

/* A TLS pair over a socketpair: client @cctx on a, server @sctx on b. */
static void pair_tls(struct pair *p, struct gw_tls_ctx *cctx, struct gw_tls_ctx *sctx)
{
	struct hs_arg h = { .ctx = sctx };
	char why[256];
	pthread_t thr;
	int ret;

	pair_plain(p);
	h.fd = p->b.fd;
	TEST_ASSERT(pthread_create(&thr, NULL, server_hs, &h) == 0, "thread");
	ret = gw_conn_start_tls(&p->a, cctx, "localhost", 5000, why, sizeof(why));
	pthread_join(thr, NULL);
	TEST_ASSERT(ret == 0 && h.ret == 0, "TLS handshake: client %d (%s), server %d", ret, why, h.ret);
	gw_conn_adopt(&p->b, p->b.fd, NULL, h.t, 0);
}

static void pair_close(struct pair *p)
{
	gw_conn_close(&p->a);
	gw_conn_close(&p->b);
}

/* Write @len bytes of @buf through @c's socket or TLS session, whole. */
static void raw_write(struct gw_conn *c, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len) {
		short ev = POLLOUT;
		ssize_t n = c->tls ? gw_tls_write(c->tls, b, len, &ev) : write(c->fd, b, len);

		if (n == -EAGAIN || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
			struct pollfd pfd = { .fd = c->fd, .events = ev };

			poll(&pfd, 1, 1000);
			continue;
		}
		if (n <= 0)
			return;	/* the reader gave up: that is what the test waits for */
		b += n;
		len -= (size_t)n;
	}
}

struct drip {
	struct gw_conn *c;
	uint8_t frame[GW_WIRE_HDR_BYTES + 64];
	size_t len;
	size_t stop_at;		/* bytes sent before it falls silent (len: drip all) */
	int quit;		/* atomic */
};

static void *dripper(void *arg)
{
	struct drip *d = arg;

	for (size_t i = 0; i < d->stop_at && !__atomic_load_n(&d->quit, __ATOMIC_ACQUIRE); i++) {
		raw_write(d->c, d->frame + i, 1);
		usleep(DRIP_GAP_US);
	}
	return NULL;
}

/* A frame dripped (or cut after @stop_at bytes) must not be received: -ETIMEDOUT. */
static void drip_case(const char *name, struct pair *p, size_t stop_at)
{
	struct drip d = { .c = &p->a };
	struct gw_frame_hdr h;
	uint8_t payload[64];
	uint32_t crc;
	pthread_t thr;
	int ret;

	memset(d.frame, 0x5a, sizeof(d.frame));
	gw_frame_hdr_encode(d.frame, GW_MSG_ERROR, 40, 0);
	d.len = GW_WIRE_HDR_BYTES + 40;
	d.stop_at = stop_at ? stop_at : d.len;
	gw_conn_set_timeout(&p->b, FRAME_MS);
	gw_conn_set_idle_timeout(&p->b, 10000);
	TEST_ASSERT(pthread_create(&thr, NULL, dripper, &d) == 0, "thread");
	ret = gw_conn_recv_hdr(&p->b, &h, &crc);
	if (!ret) {
		struct iovec iov = { payload, h.len };

		ret = gw_conn_recv_iov(&p->b, &iov, 1, &crc);
	}
	__atomic_store_n(&d.quit, 1, __ATOMIC_RELEASE);
	gw_conn_shutdown(&p->a);
	pthread_join(thr, NULL);
	TEST_CHECK(ret == -ETIMEDOUT, "%s: a frame spread over %zu x %d ms got %d, expected -ETIMEDOUT",
		   name, d.stop_at, DRIP_GAP_US / 1000, ret);
	printf("%-34s %s\n", name, ret == -ETIMEDOUT ? "timed out (frame deadline)" : "NOT timed out");
}

static void idle_case(const char *name, struct pair *p)
{
	struct gw_frame_hdr h;
	uint32_t crc;
	int ret;

	gw_conn_set_timeout(&p->b, FRAME_MS);
	gw_conn_set_idle_timeout(&p->b, 200);
	ret = gw_conn_recv_hdr(&p->b, &h, &crc);
	TEST_CHECK(ret == -ETIMEDOUT, "%s: silent peer gave %d", name, ret);
	printf("%-34s %s\n", name, ret == -ETIMEDOUT ? "timed out (idle)" : "NOT timed out");
}

struct later {
	struct gw_conn *c;
	unsigned delay_ms;
};

static void *send_later(void *arg)
{
	struct later *l = arg;

	usleep(l->delay_ms * 1000);
	gw_conn_send_msg(l->c, GW_MSG_GO, NULL);
	return NULL;
}

/* The idle wait lasts as long as the shared stamp says the session progresses. */
static void progress_case(const char *name, struct pair *p)
{
	uint64_t stamp = gw_now_ns() + 60ull * 1000000000ull;	/* "progress" until far ahead */
	struct later l = { &p->a, 500 };
	struct gw_frame_hdr h;
	pthread_t thr;
	uint32_t crc;
	int ret;

	gw_conn_set_timeout(&p->b, 100);	/* idle 100 ms: far shorter than the wait below */
	gw_conn_watch_progress(&p->b, &stamp);
	TEST_ASSERT(pthread_create(&thr, NULL, send_later, &l) == 0, "thread");
	ret = gw_conn_recv_hdr(&p->b, &h, &crc);
	pthread_join(thr, NULL);
	TEST_CHECK(ret == 0 && h.type == GW_MSG_GO, "%s: the frame after 500 ms: %d", name, ret);
	if (!ret)
		TEST_CHECK(gw_conn_recv_check(&h, crc) == 0, "%s: crc", name);
	TEST_CHECK(stamp <= gw_now_ns(), "%s: the frame did not stamp progress", name);
	/* Now the session made no progress for longer than the idle timeout. */
	__atomic_store_n(&stamp, gw_now_ns() - 1000000000ull, __ATOMIC_RELAXED);
	ret = gw_conn_recv_hdr(&p->b, &h, &crc);
	TEST_CHECK(ret == -ETIMEDOUT, "%s: no progress gave %d", name, ret);
	gw_conn_watch_progress(&p->b, NULL);
	printf("%-34s %s\n", name, ret == -ETIMEDOUT ? "waited while progressing, then timed out" : "wrong");
}

/* ---- TLS traffic: sizes, and a reader and a writer on one connection ---- */

static const size_t sizes[] = { 0, 1, 100, 16383, 16384, 16385, 65536, 1 << 20, 4 << 20 };

struct flow {
	struct gw_conn *c;
	bool send;
	int ret;
};

static uint8_t pattern(size_t i, size_t len)
{
	return (uint8_t)(i * 131 + len * 7 + 1);
}

static void *flow_main(void *arg)
{
	struct flow *f = arg;
	uint8_t *buf = malloc(4 << 20);

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && !f->ret; k++) {
		size_t len = sizes[k] > gw_frame_max_payload(GW_MSG_STATE) ? gw_frame_max_payload(GW_MSG_STATE) :
			     sizes[k];

		if (f->send) {
			struct iovec iov = { buf, len };

			for (size_t i = 0; i < len; i++)
				buf[i] = pattern(i, len);
			f->ret = gw_conn_send(f->c, GW_MSG_STATE, &iov, len ? 1 : 0, NULL, 0);
		} else {
			struct gw_frame_hdr h;
			ssize_t n = gw_conn_recv(f->c, &h, buf, 4 << 20, NULL, 0, NULL);

			if (n != (ssize_t)len) {
				f->ret = n < 0 ? (int)n : -EPROTO;
				break;
			}
			for (size_t i = 0; i < len; i++)
				if (buf[i] != pattern(i, len)) {
					f->ret = -EBADMSG;
					break;
				}
		}
	}
	free(buf);
	return NULL;
}

static void tls_traffic(struct pair *p)
{
	/* Both ways at once: b reads on one thread while another thread writes on b. */
	struct flow f[4] = { { &p->a, true, 0 }, { &p->b, false, 0 }, { &p->b, true, 0 }, { &p->a, false, 0 } };
	pthread_t thr[4];

	gw_conn_set_timeout(&p->a, 10000);
	gw_conn_set_timeout(&p->b, 10000);
	for (int i = 0; i < 4; i++)
		TEST_ASSERT(pthread_create(&thr[i], NULL, flow_main, &f[i]) == 0, "thread");
	for (int i = 0; i < 4; i++)
		pthread_join(thr[i], NULL);
	for (int i = 0; i < 4; i++)
		TEST_CHECK(f[i].ret == 0, "TLS flow %d (%s): %d", i, f[i].send ? "send" : "receive", f[i].ret);
	printf("%-34s %s\n", "tls: sizes 0..4 MiB both ways", f[0].ret || f[1].ret || f[2].ret || f[3].ret ?
	       "FAILED" : "intact");
}

int main(int argc, char **argv)
{
	struct gw_tls_config cc = { 0 }, sc = { 0 };
	struct gw_tls_ctx *cctx, *sctx;
	char dir[128], cmd[512], why[256];
	struct pair p;

	signal(SIGPIPE, SIG_IGN);
	pair_plain(&p);
	drip_case("plain: dripping a frame", &p, 0);
	pair_close(&p);
	pair_plain(&p);
	drip_case("plain: silent in mid-frame", &p, 10);
	pair_close(&p);
	pair_plain(&p);
	idle_case("plain: idle", &p);
	pair_close(&p);
	pair_plain(&p);
	progress_case("plain: progress watch", &p);
	pair_close(&p);

	if (argc < 2 || system("openssl version >/dev/null 2>&1")) {
		printf("TLS half skipped: no certificates script or openssl\n");
		TEST_EXIT();
	}
	snprintf(dir, sizeof(dir), "/tmp/gw-deadline.%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s %s", argv[1], dir);
	TEST_ASSERT(system(cmd) == 0, "certificates");
	snprintf(cc.creds_dir, sizeof(cc.creds_dir), "%s/both", dir);
	snprintf(sc.creds_dir, sizeof(sc.creds_dir), "%s/both", dir);
	cctx = gw_tls_ctx_new(GW_TLS_CLIENT, &cc, why, sizeof(why));
	TEST_ASSERT(cctx, "client ctx: %s", why);
	sctx = gw_tls_ctx_new(GW_TLS_SERVER, &sc, why, sizeof(why));
	TEST_ASSERT(sctx, "server ctx: %s", why);

	pair_tls(&p, cctx, sctx);
	drip_case("tls: dripping a frame", &p, 0);
	pair_close(&p);
	pair_tls(&p, cctx, sctx);
	drip_case("tls: silent in mid-frame", &p, 10);
	pair_close(&p);
	pair_tls(&p, cctx, sctx);
	idle_case("tls: idle", &p);
	pair_close(&p);
	pair_tls(&p, cctx, sctx);
	tls_traffic(&p);
	pair_close(&p);

	gw_tls_ctx_free(cctx);
	gw_tls_ctx_free(sctx);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	TEST_EXIT();
}
