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
#include "relay.h"

#define MAX_PAIRS 80
#define BUF_BYTES (256u << 10)

struct pair {
	int fd[2];			/* accepted, outgoing; -1 when closed */
};

struct relay {
	int listen_fd, wake_fd;
	uint16_t target_port;
	char url[64];
	pthread_t thr;
	pthread_mutex_t lock;		/* pairs, nr, cut_req, cut_all */
	struct pair pairs[MAX_PAIRS];
	unsigned nr;
	int cut_req;			/* -2 none, -1 all, else one index */
	bool cut_all;			/* refuse from now on */
	bool quit;
	uint8_t *buf;
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

/*
 * Move what is readable on @from to @to. False when the pair must close.
 * send() with MSG_NOSIGNAL: the far end of a cut pair may be gone, and a
 * write() there would raise SIGPIPE and end the whole test process.
 */
static bool forward(struct relay *r, int from, int to)
{
	ssize_t n = read(from, r->buf, BUF_BYTES);

	if (n <= 0)
		return false;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = send(to, r->buf + off, (size_t)(n - off), MSG_NOSIGNAL);

		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

static void close_pair(struct pair *p)
{
	hard_close(p->fd[0]);
	hard_close(p->fd[1]);
	p->fd[0] = p->fd[1] = -1;
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;

	for (;;) {
		struct pollfd pfd[2 + 2 * MAX_PAIRS];
		unsigned map[2 + 2 * MAX_PAIRS], n = 2;

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
		for (unsigned i = 0; i < r->nr; i++)
			for (int k = 0; k < 2; k++)
				if (r->pairs[i].fd[k] >= 0) {
					map[n] = i * 2 + (unsigned)k;
					pfd[n++] = (struct pollfd){ r->pairs[i].fd[k], POLLIN, 0 };
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

				if (out < 0) {
					hard_close(fd);
				} else {
					r->pairs[r->nr].fd[0] = fd;
					r->pairs[r->nr].fd[1] = out;
					r->nr++;
				}
			}
		}
		for (unsigned j = 2; j < n; j++) {
			struct pair *p = &r->pairs[map[j] / 2];
			int k = (int)(map[j] % 2);

			if (!pfd[j].revents || p->fd[k] < 0 || p->fd[!k] < 0)
				continue;
			if (!forward(r, p->fd[k], p->fd[!k]))
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
	r->buf = malloc(BUF_BYTES);
	r->target_port = target_port;
	r->cut_req = -2;
	pthread_mutex_init(&r->lock, NULL);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (!r->buf || r->listen_fd < 0 || r->wake_fd < 0 || bind(r->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(r->listen_fd, 128) || getsockname(r->listen_fd, (struct sockaddr *)&a, &len) ||
	    pthread_create(&r->thr, NULL, relay_main, r)) {
		free(r->buf);
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
	free(r->buf);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
