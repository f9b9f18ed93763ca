/* SPDX-License-Identifier: MIT */
/*
 * The destination's acceptor (see admit.h), its shared side: the queue of
 * admitted connections the migration thread takes from, the holder that
 * makes later HELLOs busy, refusals, start and stop. The acceptor thread
 * itself is net/admit_open.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <godwit/log.h>
#include "net/admit_int.h"
#include "net/io.h"
#include "util/thread_name.h"

#define REFUSE_SEND_MS 100		/* an ERROR to a stranger: never wait longer */

/* ---- refusals ---- */

void gw_admitted_release(struct gw_admitted *c)
{
	gw_tls_free(c->tls);
	c->tls = NULL;
	if (c->fd >= 0)
		c->sock->close(c->fd);
	c->fd = -1;
	free(c->payload);
	c->payload = NULL;
}

void admit_refuse_fd(const struct gw_sock_ops *sock, int fd, struct gw_tls *tls, int code, const char *reason)
{
	struct gw_conn tmp;

	if (!code) {
		gw_tls_free(tls);
		sock->close(fd);
		return;
	}
	gw_conn_init(&tmp, -1);
	gw_conn_adopt(&tmp, fd, sock, tls, 0);	/* its stream: plain (made blocking again) or TLS */
	gw_conn_set_send_timeout(&tmp, REFUSE_SEND_MS);
	gw_conn_send_error(&tmp, code, reason);
	gw_conn_close(&tmp);	/* closes fd, frees tls */
	pthread_mutex_destroy(&tmp.fd_lock);
	pthread_mutex_destroy(&tmp.send_lock);
}

void gw_admitted_refuse(struct gw_admitted *c, int code, const char *reason)
{
	if (c->fd >= 0)
		admit_refuse_fd(c->sock, c->fd, c->tls, code, reason);
	c->fd = -1;
	c->tls = NULL;
	gw_admitted_release(c);
}

bool gw_admit_log_allow(struct gw_admit *a, const char *event)
{
	return gw_lograte_allow(&a->lograte, event, gw_now_ns());
}

/* @peer, @reason: our words, a peer's bytes only through gw_log_str. */
void admit_log_refusal(struct gw_admit *a, const char *event, const char *peer, const char *reason)
{
	pthread_mutex_lock(&a->lock);
	a->refused++;
	pthread_mutex_unlock(&a->lock);
	if (gw_admit_log_allow(a, event))
		gw_log(GW_LOG_WARN, "mig", event, "peer=\"%s\" reason=\"%s\"", peer, reason);
}

/* ---- the queue, shared with the migration thread ---- */

int gw_admit_take(struct gw_admit *a, uint16_t type, uint64_t deadline_ns, struct gw_admitted *out)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000ull),
			       .tv_nsec = (long)(deadline_ns % 1000000000ull) };
	int ret = -ETIMEDOUT;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		for (unsigned i = 0; i < a->q_len; i++) {
			if (a->queue[i].type != type)
				continue;
			*out = a->queue[i];
			memmove(&a->queue[i], &a->queue[i + 1], (a->q_len - i - 1) * sizeof(a->queue[0]));
			a->q_len--;
			pthread_mutex_unlock(&a->lock);
			return 0;
		}
		if (a->woken) {
			ret = -ECANCELED;
			break;
		}
		if (!deadline_ns)
			pthread_cond_wait(&a->cond, &a->lock);
		else if (pthread_cond_timedwait(&a->cond, &a->lock, &ts) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void gw_admit_wake(struct gw_admit *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->woken = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

void admit_busy_text(struct gw_admit *a, char *buf, size_t len)
{
	if (a->closed_why[0])
		snprintf(buf, len, "this destination takes no more migrations: %s", a->closed_why);
	else
		snprintf(buf, len, "busy: this destination is receiving a migration from %s, for %.1f s",
			 a->holder, (gw_now_ns() - a->held_since_ns) / 1e9);
}

void gw_admit_hold(struct gw_admit *a, const uint8_t id[GW_WIRE_ID_BYTES],
		   const uint8_t challenge[GW_WIRE_ID_BYTES], const char *identity, const char *holder)
{
	struct gw_admitted busy[GW_ADMIT_QUEUE];
	unsigned nr_busy = 0, kept = 0;
	char why[GW_ADMIT_PEER_MAX + 160];

	pthread_mutex_lock(&a->lock);
	memcpy(a->id, id, sizeof(a->id));
	memcpy(a->challenge, challenge, sizeof(a->challenge));
	snprintf(a->identity, sizeof(a->identity), "%s", identity);
	snprintf(a->holder, sizeof(a->holder), "%s", holder);
	a->held_since_ns = gw_now_ns();
	a->held = true;
	/* HELLOs that queued meanwhile: busy now. */
	for (unsigned i = 0; i < a->q_len; i++) {
		if (a->queue[i].type == GW_MSG_HELLO)
			busy[nr_busy++] = a->queue[i];
		else
			a->queue[kept++] = a->queue[i];
	}
	a->q_len = kept;
	a->refused += nr_busy;
	admit_busy_text(a, why, sizeof(why));
	pthread_mutex_unlock(&a->lock);
	for (unsigned i = 0; i < nr_busy; i++) {
		if (gw_admit_log_allow(a, "busy_refused"))
			gw_log(GW_LOG_WARN, "mig", "busy_refused", "peer=\"%s\" holder=\"%s\"", busy[i].peer, holder);
		gw_admitted_refuse(&busy[i], -EBUSY, why);
	}
}

void gw_admit_close(struct gw_admit *a, const char *why)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	snprintf(a->closed_why, sizeof(a->closed_why), "%s", why);
	pthread_mutex_unlock(&a->lock);
}

uint64_t gw_admit_refused(struct gw_admit *a)
{
	uint64_t n;

	pthread_mutex_lock(&a->lock);
	n = a->refused;
	pthread_mutex_unlock(&a->lock);
	return n;
}

/* ---- start and stop ---- */

struct gw_admit *gw_admit_start(const struct gw_admit_config *cfg)
{
	struct gw_admit *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;
	int ret;

	if (!a)
		return NULL;
	a->listen_fd = cfg->listen_fd;
	a->sock = cfg->sock ? cfg->sock : &gw_sock_kernel;
	a->tls = cfg->tls;
	a->opening_ms = cfg->opening_ms;
	a->recovery = cfg->recovery;
	snprintf(a->side, sizeof(a->side), "%s", cfg->side ? cfg->side : "dst");
	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++) {
		a->op[i].fd = -1;
		a->op[i].sock = a->sock;
	}
	pthread_mutex_init(&a->lock, NULL);
	gw_lograte_init(&a->lograte);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pipe2(a->wake_pipe, O_CLOEXEC | O_NONBLOCK)) {
		ret = -errno;
		goto fail;
	}
	/* Accepts never block the loop: the listening socket is non-blocking. */
	a->sock->set_nonblock(a->listen_fd, true);
	ret = -pthread_create(&a->thread, NULL, admit_acceptor_main, a);
	if (!ret) {
		gw_thread_name(a->thread, "gw-accept");
		return a;
	}
	close(a->wake_pipe[0]);
	close(a->wake_pipe[1]);
fail:
	gw_lograte_destroy(&a->lograte);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a);
	errno = -ret;
	return NULL;
}

void gw_admit_stop(struct gw_admit *a)
{
	if (!a)
		return;
	gw_admit_wake(a);
	while (write(a->wake_pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(a->thread, NULL);
	for (unsigned i = 0; i < a->q_len; i++)
		gw_admitted_release(&a->queue[i]);
	close(a->wake_pipe[0]);
	close(a->wake_pipe[1]);
	gw_lograte_destroy(&a->lograte);	/* the last counts of lines not written */
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a);
}
