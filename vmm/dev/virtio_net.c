/* SPDX-License-Identifier: MIT */
/*
 * virtio-net over virtio-mmio with a userspace backend (virtio_net.h).
 *
 * Frames from the backend go first into a bounded FIFO (the carry FIFO),
 * then into the guest's receive chains; the guest's transmit chains go
 * straight from guest RAM to the backend. One I/O thread per device does
 * both, woken by the backend's fd and an eventfd (queue notifications,
 * stop, resume, exit).
 *
 * Invariants:
 * - A chain is popped and pushed within one hold of the transport's lock:
 *   outside it the device has nothing in flight, so the queue state
 *   (last_avail_idx, used_idx) is all there is to migrate. A chain that
 *   cannot be finished now (a frame too long for an rx chain, a backend
 *   that says EAGAIN for a tx frame) is given back to the ring (un-popped:
 *   last_avail_idx - 1), never held.
 * - After virtio_net_stop returns the thread touches no guest RAM until
 *   virtio_net_resume; it still reads the backend into the FIFO, which
 *   the carry section saves. A frame is either in the FIFO, or in guest
 *   RAM with its used entry, or (FIFO full) still in the backend.
 * - A tx frame is written to the backend and its chain pushed under the
 *   same hold of the lock: a save sees both or neither, so no frame is
 *   sent twice (by the source and again by the destination) or not at all.
 *
 * Locks: the transport's lock (t.lock) before n->lock, never the reverse.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <godwit/log.h>
#include "dev/virtio_net_int.h"

static void warn(struct virtio_net *n, const char *event, int64_t value)
{
	if (n->warned++ < VNET_WARN_MAX)
		gw_log(GW_LOG_WARN, "virtio-net", event, "dev=%s value=%" PRId64, n->t.name, value);
}

static void kick(struct virtio_net *n)
{
	uint64_t one = 1;

	/* Nonblocking; a full counter already means "wake up". */
	if (write(n->efd, &one, sizeof(one)) < 0) {
		/* nothing to do: EAGAIN means a wakeup is pending */
	}
}

/* ---- transport hooks (t.lock held) ---- */

static void config_read(struct virtio_mmio *t, uint32_t off, void *data, uint32_t len)
{
	struct virtio_net *n = t->dev;
	uint8_t cfg[VIRTIO_NET_CONFIG_BYTES];

	memcpy(cfg, n->mac, 6);
	gw_le16_put(cfg + 6, n->net_status);
	memcpy(data, cfg + off, len);
}

static void queue_notify(struct virtio_mmio *t, unsigned q)
{
	(void)q;
	kick(t->dev);		/* the I/O thread does the work, never the vCPU */
}

const struct virtio_dev_ops virtio_net_ops = {
	.name = "net",
	.device_id = VIRTIO_NET_DEVICE_ID,
	.features = VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | VIRTIO_FEATURE(VIRTIO_NET_F_STATUS) |
		    VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX) |
		    VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC),
	.nr_queues = 2,
	.queue_num_max = VIRTIO_NET_QUEUE_NUM_MAX,
	.config_bytes = VIRTIO_NET_CONFIG_BYTES,
	.config_read = config_read,
	/* no config_write: with VERSION_1 and no CTRL_MAC_ADDR the driver writes nothing there */
	.queue_notify = queue_notify,
	/* no reset hook: nothing is in flight outside a lock hold; the FIFO's frames stay */
	.save = virtio_net_dev_save,
	.load = virtio_net_dev_load,
};

const struct net_backend_ops *const net_backends[] = { &net_backend_tap, &net_backend_fd, NULL };

/* ---- the I/O thread ---- */

/* Read the backend into the FIFO's tail. true: frames may remain (budget spent). */
static bool fill(struct virtio_net *n)
{
	for (unsigned i = 0; i < VIRTIO_NET_BUDGET; i++) {
		struct vnet_frame *f;
		struct iovec iov[2];
		unsigned count;
		ssize_t len;

		pthread_mutex_lock(&n->lock);
		count = n->count;
		pthread_mutex_unlock(&n->lock);
		if (count == VIRTIO_NET_CARRY_MAX_FRAMES) {
			/* Left in the backend's queue: back-pressure, not a drop of ours. */
			if (!n->fifo_full_noted) {
				n->fifo_full_noted = true;
				pthread_mutex_lock(&n->lock);
				n->stats.rx_backlog_full++;
				pthread_mutex_unlock(&n->lock);
			}
			return false;
		}
		n->fifo_full_noted = false;
		f = &n->fifo[(n->head + count) % VIRTIO_NET_CARRY_MAX_FRAMES];	/* a free slot */
		iov[0] = (struct iovec){ f->data, sizeof(f->data) };
		iov[1] = (struct iovec){ n->spill, sizeof(n->spill) };
		len = n->be.ops->read_frame(&n->be, iov, 2);
		if (len == 0)
			return false;
		if (len < 0) {
			warn(n, "backend_read_error", len);
			return false;
		}
		pthread_mutex_lock(&n->lock);
		if (len > VIRTIO_NET_FRAME_MAX_BYTES) {
			n->stats.rx_dropped_too_long++;
		} else {
			f->len = (uint16_t)len;
			n->count++;
		}
		pthread_mutex_unlock(&n->lock);
	}
	return true;
}

static void fifo_consume(struct virtio_net *n, bool delivered)
{
	pthread_mutex_lock(&n->lock);
	if (delivered) {
		n->stats.rx_frames++;
		n->stats.rx_bytes += n->fifo[n->head].len;
	} else {
		n->stats.rx_dropped_too_long++;
	}
	n->head = (n->head + 1) % VIRTIO_NET_CARRY_MAX_FRAMES;
	n->count--;
	pthread_mutex_unlock(&n->lock);
}

/* FIFO into receive chains (t.lock held). true: call again without waiting. */
static bool deliver_rx(struct virtio_net *n)
{
	static const uint8_t zero_hdr[VIRTIO_NET_HDR_BYTES - 2];
	struct virtq *vq = virtio_mmio_queue(&n->t, VIRTIO_NET_RXQ);
	struct virtq_elem *e = &n->elem;
	unsigned budget = VIRTIO_NET_BUDGET;
	bool out_of_buffers = false;
	uint8_t num_buffers[2];
	int ret = 0;

	if (!vq)
		return false;
	gw_le16_put(num_buffers, 1);	/* 5.1.6.4: 1 without MRG_RXBUF */
	for (;;) {
		while (budget && virtio_net_run_state(n) == NET_RUNNING) {
			const struct vnet_frame *f;
			unsigned count;

			pthread_mutex_lock(&n->lock);
			count = n->count;
			pthread_mutex_unlock(&n->lock);
			if (!count)
				break;
			/* Only this thread consumes: the head slot is stable without the lock. */
			f = &n->fifo[n->head];
			ret = virtq_pop(vq, e);
			if (ret == 0) {
				out_of_buffers = true;
				break;
			}
			if (ret < 0)
				break;
			budget--;
			if (e->nr_out) {
				virtio_mmio_needs_reset(&n->t, VIRTIO_NET_RXQ,
							"receive chain has a device-readable buffer", e->head);
				ret = -EPROTO;
				break;
			}
			if (e->in_bytes < VIRTIO_NET_HDR_BYTES) {
				virtio_mmio_needs_reset(&n->t, VIRTIO_NET_RXQ,
							"receive chain shorter than virtio_net_hdr", e->in_bytes);
				ret = -EPROTO;
				break;
			}
			if (f->len > e->in_bytes - VIRTIO_NET_HDR_BYTES) {
				/* Dropped, the chain given back for the next frame: nothing in flight. */
				vq->last_avail_idx--;
				fifo_consume(n, false);
				continue;
			}
			ret = virtq_elem_write(vq, e, 0, zero_hdr, sizeof(zero_hdr));
			if (!ret)
				ret = virtq_elem_write(vq, e, sizeof(zero_hdr), num_buffers, 2);
			if (!ret)
				ret = virtq_elem_write(vq, e, VIRTIO_NET_HDR_BYTES, f->data, f->len);
			if (!ret)
				ret = virtq_push(vq, e, VIRTIO_NET_HDR_BYTES + f->len);
			if (ret)
				break;
			fifo_consume(n, true);
			if (!n->rx_first_noted) {
				/* The stamp where frames reach the guest on a destination. */
				n->rx_first_noted = true;
				gw_log(GW_LOG_INFO, "virtio-net", "rx_first", "dev=%s len=%u", n->t.name,
				       (unsigned)(VIRTIO_NET_HDR_BYTES + f->len));
			}
		}
		virtio_mmio_used(&n->t, VIRTIO_NET_RXQ);
		if (ret < 0) {
			virtio_mmio_check(&n->t, VIRTIO_NET_RXQ, ret);
			return false;
		}
		if (!out_of_buffers)
			break;
		/* Frames wait: ask for a kick at the next buffer, and look once more (2.7.10). */
		if (!virtq_set_notify(vq, true) || !budget)
			return false;
		out_of_buffers = false;
	}
	pthread_mutex_lock(&n->lock);
	ret = n->count != 0;
	pthread_mutex_unlock(&n->lock);
	return ret && budget == 0;
}

/* One tx chain to the backend. 1 sent or dropped (push it), 0 EAGAIN (un-pop), -EPROTO. */
static int tx_one(struct virtio_net *n, struct virtq *vq, struct virtq_elem *e)
{
	uint8_t hdr[VIRTIO_NET_HDR_BYTES];
	uint32_t skip = VIRTIO_NET_HDR_BYTES, len;
	unsigned nr = 0;
	ssize_t w;
	int ret;

	if (e->nr_in) {
		virtio_mmio_needs_reset(&n->t, VIRTIO_NET_TXQ,
					"transmit chain has a device-writable buffer", e->head);
		return -EPROTO;
	}
	if (e->out_bytes < VIRTIO_NET_HDR_BYTES) {
		virtio_mmio_needs_reset(&n->t, VIRTIO_NET_TXQ,
					"transmit chain shorter than virtio_net_hdr", e->out_bytes);
		return -EPROTO;
	}
	ret = virtq_elem_read(vq, e, 0, hdr, sizeof(hdr));
	if (ret)
		return ret;
	len = e->out_bytes - VIRTIO_NET_HDR_BYTES;
	/* No CSUM or GSO was offered: a frame asking for either would leave wrong. */
	if (len == 0 || len > VIRTIO_NET_FRAME_MAX_BYTES || (hdr[0] & VNET_HDR_F_NEEDS_CSUM) ||
	    hdr[1] != VNET_HDR_GSO_NONE) {
		pthread_mutex_lock(&n->lock);
		n->stats.tx_dropped++;
		pthread_mutex_unlock(&n->lock);
		return 1;
	}
	for (unsigned i = 0; i < e->nr_out; i++) {
		size_t l = e->iov[i].iov_len;

		if (skip >= l) {
			skip -= (uint32_t)l;
			continue;
		}
		n->tx_iov[nr++] = (struct iovec){ (uint8_t *)e->iov[i].iov_base + skip, l - skip };
		skip = 0;
	}
	w = n->be.ops->write_frame(&n->be, n->tx_iov, (int)nr);
	if (w == -EAGAIN)
		return 0;
	pthread_mutex_lock(&n->lock);
	if (w < 0) {
		n->stats.tx_dropped++;
	} else {
		n->stats.tx_frames++;
		n->stats.tx_bytes += len;
	}
	pthread_mutex_unlock(&n->lock);
	if (w < 0)
		warn(n, "backend_write_error", w);
	return 1;
}

/* Transmit chains to the backend (t.lock held). true: call again without waiting. */
static bool do_tx(struct virtio_net *n)
{
	struct virtq *vq = virtio_mmio_queue(&n->t, VIRTIO_NET_TXQ);
	struct virtq_elem *e = &n->elem;
	unsigned budget = VIRTIO_NET_BUDGET;
	int ret = 0;

	n->tx_blocked = false;
	if (!vq)
		return false;
	do {
		virtq_set_notify(vq, false);
		while (budget && virtio_net_run_state(n) == NET_RUNNING && (ret = virtq_pop(vq, e)) == 1) {
			budget--;
			ret = tx_one(n, vq, e);
			if (ret == 0) {
				vq->last_avail_idx--;	/* not sent: back to the ring, not held */
				n->tx_blocked = true;
				break;
			}
			if (ret < 0)
				break;
			ret = virtq_push(vq, e, 0);
			if (ret < 0)
				break;
		}
		virtio_mmio_used(&n->t, VIRTIO_NET_TXQ);
		if (ret < 0) {
			virtio_mmio_check(&n->t, VIRTIO_NET_TXQ, ret);
			return false;
		}
		if (n->tx_blocked)
			return false;		/* POLLOUT wakes us; notifications stay off meanwhile */
		if (!budget || virtio_net_run_state(n) != NET_RUNNING)
			return virtio_net_run_state(n) == NET_RUNNING;
	} while (virtq_set_notify(vq, true));
	return false;
}

static void *io_main(void *arg)
{
	struct virtio_net *n = arg;
	bool more = true;

	for (;;) {
		struct pollfd pfd[2];
		unsigned count;
		uint64_t v;
		int st;

		pthread_mutex_lock(&n->lock);
		st = n->state;
		if (st == NET_STOP_REQ) {
			n->state = st = NET_STOPPED;
			pthread_cond_broadcast(&n->cond);
		}
		pthread_mutex_unlock(&n->lock);
		if (st == NET_EXIT)
			break;
		if (!n->backend_dead)
			more |= fill(n);
		if (st == NET_RUNNING) {
			virtio_mmio_lock(&n->t);
			more |= deliver_rx(n);
			more |= do_tx(n);
			virtio_mmio_unlock(&n->t);
		}
		pthread_mutex_lock(&n->lock);
		count = n->count;
		pthread_mutex_unlock(&n->lock);
		pfd[0] = (struct pollfd){ .fd = n->efd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = n->be.ops->poll_fd(&n->be), .events = 0 };
		if (count < VIRTIO_NET_CARRY_MAX_FRAMES)
			pfd[1].events |= POLLIN;
		if (n->tx_blocked && st == NET_RUNNING)
			pfd[1].events |= POLLOUT;
		if (n->backend_dead)
			pfd[1].fd = -1;
		if (poll(pfd, 2, more ? 0 : -1) < 0 && errno != EINTR)
			warn(n, "poll_error", -errno);
		more = false;
		if (pfd[0].revents & POLLIN) {
			if (read(n->efd, &v, sizeof(v)) < 0) {
				/* EAGAIN: another wakeup took it */
			}
			more = true;	/* a kick: look at both queues */
		}
		if (pfd[1].revents & (POLLHUP | POLLERR)) {
			gw_log(GW_LOG_WARN, "virtio-net", "backend_closed", "dev=%s backend=%s",
			       n->t.name, n->be.ops->name);
			n->backend_dead = true;
			more = true;	/* read what is left once more, then never */
			fill(n);
		}
		if (pfd[1].revents & POLLOUT)
			more = true;
	}
	return NULL;
}

/* ---- lifecycle ---- */

static void default_mac(const char *name, uint8_t mac[6])
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	mac[0] = 0x52, mac[1] = 0x54, mac[2] = 0x00;
	mac[3] = (uint8_t)(h >> 16), mac[4] = (uint8_t)(h >> 8), mac[5] = (uint8_t)h;
}

struct virtio_net *virtio_net_new(const struct virtio_net_config *cfg)
{
	const char *name = cfg && cfg->name ? cfg->name : "virtio-net0";
	pthread_condattr_t ca;
	struct virtio_net *n;
	int ret = -EINVAL;

	if (!cfg || !cfg->backend || !cfg->mem || !cfg->irq ||
	    strlen(name) + sizeof(VIRTIO_NET_CARRY_SUFFIX) > GW_SECTION_NAME_MAX)
		goto fail_fd;
	ret = -ENOMEM;
	n = calloc(1, sizeof(*n));
	if (!n)
		goto fail_fd;
	n->fifo = calloc(VIRTIO_NET_CARRY_MAX_FRAMES, sizeof(*n->fifo));
	if (!n->fifo)
		goto fail_n;
	n->be.ops = cfg->backend;
	n->be.fd = -1;
	ret = cfg->backend->open(&n->be, cfg->backend_arg, cfg->backend_fd);
	if (ret) {
		if (cfg->backend == &net_backend_fd && cfg->backend_fd >= 0)
			close(cfg->backend_fd);
		goto fail_fifo;
	}
	n->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (n->efd < 0) {
		ret = -errno;
		goto fail_be;
	}
	ret = -pthread_mutex_init(&n->lock, NULL);
	if (ret)
		goto fail_efd;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	ret = -pthread_cond_init(&n->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (ret)
		goto fail_lock;
	if (cfg->mac_set)
		memcpy(n->mac, cfg->mac, 6);
	else
		default_mac(name, n->mac);
	n->net_status = VIRTIO_NET_S_LINK_UP;
	snprintf(n->carry_name, sizeof(n->carry_name), "%s%s", name, VIRTIO_NET_CARRY_SUFFIX);
	atomic_init(&n->state, NET_IDLE);
	ret = virtio_mmio_init(&n->t, &virtio_net_ops, n, name, cfg->base_gpa, cfg->gsi, cfg->mem,
			       cfg->irq, cfg->irq_opaque);
	if (ret)
		goto fail_cond;
	gw_log(GW_LOG_INFO, "virtio-net", "open", "dev=%s backend=%s ifname=%s "
	       "mac=%02x:%02x:%02x:%02x:%02x:%02x gpa=%#" PRIx64 " gsi=%u", n->t.name,
	       n->be.ops->name, n->be.ifname[0] ? n->be.ifname : "-", n->mac[0], n->mac[1],
	       n->mac[2], n->mac[3], n->mac[4], n->mac[5], cfg->base_gpa, cfg->gsi);
	return n;

fail_cond:
	pthread_cond_destroy(&n->cond);
fail_lock:
	pthread_mutex_destroy(&n->lock);
fail_efd:
	close(n->efd);
fail_be:
	n->be.ops->close(&n->be);
fail_fifo:
	free(n->fifo);
fail_n:
	free(n);
	errno = -ret;
	return NULL;
fail_fd:
	if (cfg && cfg->backend == &net_backend_fd && cfg->backend_fd >= 0)
		close(cfg->backend_fd);
	errno = -ret;
	return NULL;
}

int virtio_net_register(struct virtio_net *n, struct vmm_mmio_bus *bus)
{
	return vmm_mmio_register(bus, n->t.base_gpa, VIRTIO_MMIO_REGION_BYTES, virtio_mmio_access,
				 &n->t);
}

uint64_t virtio_net_base_gpa(const struct virtio_net *n)
{
	return n->t.base_gpa;
}

uint32_t virtio_net_gsi(const struct virtio_net *n)
{
	return n->t.gsi;
}

struct virtio_mmio *virtio_net_transport(struct virtio_net *n)
{
	return &n->t;
}

const char *virtio_net_ifname(const struct virtio_net *n)
{
	return n->be.ifname;
}

void virtio_net_mac(const struct virtio_net *n, uint8_t mac[6])
{
	memcpy(mac, n->mac, 6);
}

int virtio_net_start(struct virtio_net *n)
{
	int ret;

	if (n->thread_started)
		return -EALREADY;
	atomic_store(&n->state, NET_RUNNING);
	ret = -pthread_create(&n->thread, NULL, io_main, n);
	if (ret) {
		atomic_store(&n->state, NET_IDLE);
		return ret;
	}
	n->thread_started = true;
	return 0;
}

int virtio_net_stop(struct virtio_net *n)
{
	struct timespec until;
	unsigned backlog;
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(VIRTIO_NET_STOP_TIMEOUT_NS / 1000000000u);
	pthread_mutex_lock(&n->lock);
	if (n->state == NET_RUNNING) {
		n->state = NET_STOP_REQ;
		kick(n);
	}
	while (n->state == NET_STOP_REQ && !ret)
		ret = -pthread_cond_timedwait(&n->cond, &n->lock, &until);
	ret = n->state == NET_STOP_REQ ? -ETIMEDOUT : 0;
	backlog = n->count;
	pthread_mutex_unlock(&n->lock);
	gw_log(ret ? GW_LOG_ERROR : GW_LOG_INFO, "virtio-net", "stop", "dev=%s ret=%d backlog=%u",
	       n->t.name, ret, backlog);
	return ret;
}

int virtio_net_resume(struct virtio_net *n)
{
	int ret = -EINVAL;
	unsigned backlog;

	pthread_mutex_lock(&n->lock);
	/* A stop that timed out still resolves: the thread acknowledges, then runs again. */
	if (n->state == NET_STOPPED || n->state == NET_STOP_REQ) {
		n->state = NET_RUNNING;
		n->saved = false;
		kick(n);
		ret = 0;
	} else if (n->state == NET_IDLE) {
		ret = 0;	/* never started: nothing was stopped */
	}
	backlog = n->count;
	pthread_mutex_unlock(&n->lock);
	gw_log(ret ? GW_LOG_ERROR : GW_LOG_INFO, "virtio-net", "resume", "dev=%s ret=%d backlog=%u",
	       n->t.name, ret, backlog);
	return ret;
}

void virtio_net_get_stats(struct virtio_net *n, struct virtio_net_stats *out)
{
	pthread_mutex_lock(&n->lock);
	*out = n->stats;
	out->backlog_frames = n->count;
	pthread_mutex_unlock(&n->lock);
}

unsigned virtio_net_backend_drain(struct virtio_net *n, unsigned max)
{
	unsigned nr = 0;

	while (nr < max) {
		struct iovec iov = { n->spill, sizeof(n->spill) };

		if (n->be.ops->read_frame(&n->be, &iov, 1) <= 0)
			break;
		nr++;
	}
	return nr;
}

void virtio_net_destroy(struct virtio_net *n)
{
	unsigned left = 0, not_carried;

	if (!n)
		return;
	if (n->thread_started) {
		pthread_mutex_lock(&n->lock);
		n->state = NET_EXIT;
		kick(n);
		pthread_mutex_unlock(&n->lock);
		pthread_join(n->thread, NULL);
	}
	/* What a successful migration could not carry: after the save, and still in the backend. */
	left = virtio_net_backend_drain(n, VNET_CLOSE_DRAIN_MAX);
	not_carried = n->saved ? n->count - n->saved_frames : n->count;
	gw_log(GW_LOG_INFO, "virtio-net", "close", "dev=%s saved=%d backlog_not_carried=%u "
	       "left_in_backend=%u rx_frames=%" PRIu64 " tx_frames=%" PRIu64 " rx_dropped=%" PRIu64
	       " tx_dropped=%" PRIu64, n->t.name, n->saved, not_carried, left, n->stats.rx_frames,
	       n->stats.tx_frames, n->stats.rx_dropped_too_long, n->stats.tx_dropped);
	virtio_mmio_destroy(&n->t);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	close(n->efd);
	n->be.ops->close(&n->be);
	free(n->fifo);
	free(n);
}
