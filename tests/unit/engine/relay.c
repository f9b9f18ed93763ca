/* SPDX-License-Identifier: MIT */
/* A TCP relay that a test can cut (see relay.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <godwit/buf.h>
#include "relay.h"
#include "wire/frame.h"

#define MAX_PAIRS 80
#define DIR_BYTES (128u << 10)		/* what one direction of a pair holds before it is sent */

/* Where the scan is in the frames one connection's source sends. */
struct scan {
	uint8_t head[GW_WIRE_HDR_BYTES + 8];	/* the header, then a PAGES frame's block and entry count */
	unsigned have_bytes;		/* of head, until the header is whole */
	uint16_t type;			/* of the frame in progress (0: in its header) */
	uint32_t len_bytes;		/* its payload */
	uint32_t off_bytes;		/* payload bytes seen */
	bool lost;			/* not godwit frames: not scanned any more */
};

/*
 * Direction k of a pair moves fd[k]'s bytes to fd[!k] through buf[k]: it
 * reads only when buf[k] is empty and sends without blocking, so one end
 * that does not read stalls its own direction only, never the others.
 */
struct pair {
	int fd[2];			/* accepted, outgoing; -1 when closed */
	uint8_t *buf[2];		/* DIR_BYTES each */
	size_t len[2], off[2];		/* bytes held in buf[k], of which sent */
	bool frozen;			/* the source's bytes are dropped (an armed cut of another) */
	struct scan scan;		/* of fd[0]'s bytes, while a cut is armed */
};

struct relay {
	int listen_fd, wake_fd;
	uint16_t target_port;
	char url[64];
	pthread_t thr;
	pthread_mutex_t lock;		/* everything below (the thread forwards under it) */
	struct pair pairs[MAX_PAIRS];
	unsigned nr;
	int cut_req;			/* -2 none, -1 all, else one index */
	bool cut_all;			/* refuse from now on */
	bool quit;
	/* The armed cut (relay_cut_at) and the scan's totals. */
	bool armed, cut_made;
	int cut_only;			/* as relay_cut's @only */
	unsigned cut_pct;
	bool pc_seen;			/* a PC_DIRTY went through: PAGES from now on are postcopy's */
	uint64_t set_pages;		/* bits of every PC_DIRTY map */
	uint64_t pc_pages;		/* PAGES entries since the first PC_DIRTY, cut frame excluded */
};

static void hard_close(int fd)
{
	struct linger l = { 1, 0 };

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static int connect_target(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void close_pair(struct pair *p)
{
	hard_close(p->fd[0]);
	hard_close(p->fd[1]);
	p->fd[0] = p->fd[1] = -1;
	for (int k = 0; k < 2; k++) {
		free(p->buf[k]);
		p->buf[k] = NULL;
		p->len[k] = p->off[k] = 0;
	}
}

/* The armed cut's threshold: @pct % of the postcopy set, at least one page. */
static uint64_t cut_pages(const struct relay *r)
{
	uint64_t t = r->set_pages * r->cut_pct / 100;

	return t ? t : 1;
}

/* A frame's header is whole in sc->head: what it is, or lost. */
static void scan_header(struct relay *r, struct scan *sc)
{
	struct gw_frame_hdr h;

	if (gw_frame_hdr_decode(sc->head, &h)) {
		sc->lost = true;
		return;
	}
	sc->type = h.type;
	sc->len_bytes = h.len;
	sc->off_bytes = 0;
	if (h.type == GW_MSG_PC_DIRTY)
		r->pc_seen = true;
}

/*
 * Scan @n bytes the source sent on @sc's connection. Returns how many of
 * them go through; *@cut when the armed cut falls after those: inside a
 * postcopy PAGES frame whose entries would reach the threshold, after its
 * entry count (the destination never gets that frame whole).
 * PC_DIRTY: le32 block, le32 nr_words, le64 first_page, then the words.
 * PAGES: le32 block, le32 nr_entries, ... (docs/protocol.md).
 */
static size_t scan(struct relay *r, struct scan *sc, const uint8_t *p, size_t n, bool *cut)
{
	size_t i = 0;

	*cut = false;
	while (i < n && !sc->lost) {
		if (!sc->type) {
			size_t take = GW_WIRE_HDR_BYTES - sc->have_bytes;

			take = take < n - i ? take : n - i;
			memcpy(sc->head + sc->have_bytes, p + i, take);
			sc->have_bytes += (unsigned)take;
			i += take;
			if (sc->have_bytes == GW_WIRE_HDR_BYTES)
				scan_header(r, sc);
		} else {
			uint32_t left = sc->len_bytes - sc->off_bytes;
			size_t take = left < n - i ? left : n - i;

			if (sc->type == GW_MSG_PAGES && r->pc_seen && sc->off_bytes < 8) {
				take = take < 8u - sc->off_bytes ? take : 8u - sc->off_bytes;
				memcpy(sc->head + GW_WIRE_HDR_BYTES + sc->off_bytes, p + i, take);
				if (sc->off_bytes + take == 8) {
					uint32_t entries = gw_le32_get(sc->head + GW_WIRE_HDR_BYTES + 4);

					if (r->pc_pages + entries >= cut_pages(r)) {
						*cut = true;
						return i + take;
					}
					r->pc_pages += entries;
				}
			} else if (sc->type == GW_MSG_PC_DIRTY) {
				for (size_t k = 0; k < take; k++)
					if (sc->off_bytes + k >= 16)
						r->set_pages += (uint64_t)__builtin_popcount(p[i + k]);
			}
			sc->off_bytes += (uint32_t)take;
			i += take;
		}
		if (sc->type && sc->off_bytes == sc->len_bytes)
			sc->type = 0, sc->have_bytes = 0;
	}
	return n;
}

/*
 * The armed cut: @only's pair (or every pair) closed, the source's bytes
 * on the others dropped from now on.
 */
static void armed_cut(struct relay *r)
{
	int only = r->cut_only < 0 || !r->nr ? -1 : r->cut_only % (int)r->nr;

	r->armed = false;
	r->cut_made = true;
	for (unsigned i = 0; i < r->nr; i++) {
		struct pair *p = &r->pairs[i];

		if (only < 0 || (int)i == only) {
			close_pair(p);
		} else {
			p->frozen = true;
			p->len[0] = p->off[0] = 0;	/* what it held was on the link */
		}
	}
	if (only < 0)
		r->cut_all = true;
}

/*
 * Send what direction @k of @p holds, as far as the far end takes it now.
 * False when the pair must close. MSG_NOSIGNAL: the far end of a cut pair
 * may be gone, and a write() there would raise SIGPIPE and end the whole
 * test process.
 */
static bool flush(struct pair *p, int k)
{
	while (p->off[k] < p->len[k]) {
		ssize_t w = send(p->fd[!k], p->buf[k] + p->off[k], p->len[k] - p->off[k], MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (w <= 0)
			return false;
		p->off[k] += (size_t)w;
	}
	p->len[k] = p->off[k] = 0;
	return true;
}

/*
 * Read what fd[@k] of @p has (buf[k] is empty) and send it on. False when
 * the pair must close. The source's bytes (k 0) are scanned while a cut is
 * armed, and dropped on a frozen pair.
 */
static bool pull(struct relay *r, struct pair *p, int k)
{
	ssize_t n = read(p->fd[k], p->buf[k], DIR_BYTES);
	bool cut = false, ok;

	if (n <= 0)
		return false;
	if (k == 0 && p->frozen)
		return true;
	p->len[k] = k == 0 && r->armed ? scan(r, &p->scan, p->buf[k], (size_t)n, &cut) : (size_t)n;
	p->off[k] = 0;
	ok = flush(p, k);
	if (cut)
		armed_cut(r);	/* even when this pair failed: the cut is due */
	return ok;
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;

	for (;;) {
		struct pollfd pfd[2 + 2 * MAX_PAIRS];
		unsigned map[2 + 2 * MAX_PAIRS], n = 2;	/* pair * 2 + direction */

		pthread_mutex_lock(&r->lock);
		if (r->quit) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		if (r->cut_req != -2) {
			for (unsigned i = 0; i < r->nr; i++)
				if (r->cut_req == -1 || (int)i == r->cut_req)
					close_pair(&r->pairs[i]);
			if (r->cut_req == -1)
				r->cut_all = true;
			r->cut_req = -2;
		}
		pfd[0] = (struct pollfd){ r->listen_fd, POLLIN, 0 };
		pfd[1] = (struct pollfd){ r->wake_fd, POLLIN, 0 };
		for (unsigned i = 0; i < r->nr; i++) {
			struct pair *p = &r->pairs[i];

			for (int k = 0; k < 2 && p->fd[0] >= 0; k++) {
				bool held = p->off[k] < p->len[k];

				map[n] = i * 2 + (unsigned)k;	/* held: wait until the far end takes more */
				pfd[n++] = (struct pollfd){ held ? p->fd[!k] : p->fd[k], held ? POLLOUT : POLLIN, 0 };
			}
		}
		pthread_mutex_unlock(&r->lock);
		if (poll(pfd, n, 1000) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents) {
			uint64_t v;

			if (read(r->wake_fd, &v, sizeof(v)) < 0)
				continue;
		}
		pthread_mutex_lock(&r->lock);
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0 && (r->cut_all || r->nr == MAX_PAIRS)) {
				hard_close(fd);
			} else if (fd >= 0) {
				int out = connect_target(r->target_port);

				struct pair *p = &r->pairs[r->nr];

				*p = (struct pair){ .fd = { fd, out } };
				p->buf[0] = malloc(DIR_BYTES);
				p->buf[1] = malloc(DIR_BYTES);
				if (out < 0 || !p->buf[0] || !p->buf[1])
					close_pair(p);
				else
					r->nr++;
			}
		}
		for (unsigned j = 2; j < n; j++) {
			struct pair *p = &r->pairs[map[j] / 2];
			int k = (int)(map[j] % 2);

			if (!pfd[j].revents || p->fd[0] < 0)
				continue;
			if (!(p->off[k] < p->len[k] ? flush(p, k) : pull(r, p, k)))
				close_pair(p);
		}
		pthread_mutex_unlock(&r->lock);
	}
	return NULL;
}

struct relay *relay_start(uint16_t target_port)
{
	struct relay *r = calloc(1, sizeof(*r));
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);

	if (!r)
		return NULL;
	r->target_port = target_port;
	r->cut_req = -2;
	pthread_mutex_init(&r->lock, NULL);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (r->listen_fd < 0 || r->wake_fd < 0 || bind(r->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(r->listen_fd, 128) || getsockname(r->listen_fd, (struct sockaddr *)&a, &len) ||
	    pthread_create(&r->thr, NULL, relay_main, r)) {
		if (r->listen_fd >= 0)
			close(r->listen_fd);
		if (r->wake_fd >= 0)
			close(r->wake_fd);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return NULL;
	}
	snprintf(r->url, sizeof(r->url), "tcp:127.0.0.1:%u", ntohs(a.sin_port));
	return r;
}

const char *relay_url(const struct relay *r)
{
	return r->url;
}

unsigned relay_conns(struct relay *r)
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->nr;
	pthread_mutex_unlock(&r->lock);
	return n;
}

static void wake(struct relay *r)
{
	uint64_t one = 1;

	if (write(r->wake_fd, &one, sizeof(one)) < 0)
		perror("relay wake");
}

void relay_cut(struct relay *r, int only)
{
	pthread_mutex_lock(&r->lock);
	r->cut_req = only < 0 ? -1 : only;
	pthread_mutex_unlock(&r->lock);
	wake(r);
}

void relay_cut_at(struct relay *r, int only, unsigned pct)
{
	pthread_mutex_lock(&r->lock);
	r->armed = true;
	r->cut_only = only;
	r->cut_pct = pct;
	pthread_mutex_unlock(&r->lock);
}

bool relay_cut_made(struct relay *r, uint64_t *pages, uint64_t *set_pages)
{
	bool made;

	pthread_mutex_lock(&r->lock);
	made = r->cut_made;
	if (pages)
		*pages = r->pc_pages;
	if (set_pages)
		*set_pages = r->set_pages;
	pthread_mutex_unlock(&r->lock);
	return made;
}

void relay_stop(struct relay *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->quit = true;
	pthread_mutex_unlock(&r->lock);
	wake(r);
	pthread_join(r->thr, NULL);
	for (unsigned i = 0; i < r->nr; i++)
		close_pair(&r->pairs[i]);
	close(r->listen_fd);
	close(r->wake_fd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
