/* SPDX-License-Identifier: MIT */
/*
 * virtio-net's state (virtio_net.h): the net part of the transport's
 * section and the carry section of frames read from the backend but not
 * yet in guest RAM.
 *
 * The carry section "<name>-rx", version 1, little-endian:
 *   le32 nr_frames            at most VIRTIO_NET_CARRY_MAX_FRAMES
 *   le32 reserved (0)
 *   nr_frames times: le16 len (1..VIRTIO_NET_FRAME_MAX_BYTES), len bytes
 * oldest first; nothing may trail. The transport's section "<name>" ends
 * with the net part (virtio_state.c's device bytes, 12):
 *   u8 mac[6], le16 status (VIRTIO_NET_S_LINK_UP or 0), le32 reserved (0)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/log.h>
#include "dev/virtio_net_int.h"

int virtio_net_dev_save(struct virtio_mmio *t, struct gw_wbuf *w)
{
	struct virtio_net *n = t->dev;

	gw_put_bytes(w, n->mac, 6);
	gw_put_le16(w, n->net_status);
	gw_put_le32(w, 0);	/* reserved */
	return 0;
}

int virtio_net_dev_load(struct virtio_mmio *t, struct gw_rbuf *r, char *why, size_t why_len)
{
	struct virtio_net *n = t->dev;
	const uint8_t *mac = gw_get_bytes(r, 6);
	uint16_t status = gw_get_le16(r);
	uint32_t reserved = gw_get_le32(r);

	if (!mac || gw_rbuf_done(r)) {
		snprintf(why, why_len, "%s: net part of %zu bytes, expected 12", t->name, r->len);
		return -EINVAL;
	}
	if (status & ~VIRTIO_NET_S_LINK_UP || reserved) {
		snprintf(why, why_len, "%s: net status %#x (reserved %#x) unknown", t->name, status,
			 reserved);
		return -EINVAL;
	}
	/* The guest has read the source's MAC: that one stays, whatever this side was given. */
	if (memcmp(mac, n->mac, 6))
		gw_log(GW_LOG_INFO, "virtio-net", "mac_from_source",
		       "dev=%s mac=%02x:%02x:%02x:%02x:%02x:%02x", t->name, mac[0], mac[1], mac[2],
		       mac[3], mac[4], mac[5]);
	memcpy(n->mac, mac, 6);
	n->net_status = status;
	return 0;
}

size_t virtio_net_carry_max_bytes(void)
{
	return 8 + (size_t)VIRTIO_NET_CARRY_MAX_FRAMES * (2 + VIRTIO_NET_FRAME_MAX_BYTES);
}

int virtio_net_encode_carry(struct virtio_net *n, struct gw_wbuf *w)
{
	pthread_mutex_lock(&n->lock);
	gw_put_le32(w, n->count);
	gw_put_le32(w, 0);
	for (unsigned i = 0; i < n->count; i++) {
		const struct vnet_frame *f = &n->fifo[(n->head + i) % VIRTIO_NET_CARRY_MAX_FRAMES];

		gw_put_le16(w, f->len);
		gw_put_bytes(w, f->data, f->len);
	}
	if (!w->overflow) {
		n->saved = true;
		n->saved_frames = n->count;
		n->stats.carried_out = n->count;
	}
	pthread_mutex_unlock(&n->lock);
	return gw_wbuf_done(w);
}

/* Check a carry section; with @apply (and lock held, thread not started) make it the FIFO. */
static int carry_decode(struct virtio_net *n, const void *buf, size_t len, uint32_t version,
			bool apply, char *why, size_t why_len)
{
	struct gw_rbuf r;
	uint32_t nr, reserved;

	if (version != VIRTIO_NET_CARRY_VERSION) {
		snprintf(why, why_len, "%s: version %u, this VMM reads %u", n->carry_name, version,
			 VIRTIO_NET_CARRY_VERSION);
		return -EINVAL;
	}
	gw_rbuf_init(&r, buf, len);
	nr = gw_get_le32(&r);
	reserved = gw_get_le32(&r);
	if (r.underrun || nr > VIRTIO_NET_CARRY_MAX_FRAMES || reserved) {
		snprintf(why, why_len, "%s: %u frames (reserved %#x), at most %u", n->carry_name, nr,
			 reserved, VIRTIO_NET_CARRY_MAX_FRAMES);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < nr; i++) {
		uint16_t flen = gw_get_le16(&r);
		const void *p = gw_get_bytes(&r, flen);

		if (!p || flen == 0 || flen > VIRTIO_NET_FRAME_MAX_BYTES) {
			snprintf(why, why_len, "%s: frame %u of %u bytes (1..%u, section %zu)",
				 n->carry_name, i, flen, VIRTIO_NET_FRAME_MAX_BYTES, len);
			return -EINVAL;
		}
		if (apply) {
			n->fifo[i].len = flen;
			memcpy(n->fifo[i].data, p, flen);
		}
	}
	if (gw_rbuf_done(&r)) {
		snprintf(why, why_len, "%s: %zu bytes trail the frames", n->carry_name, len - r.off);
		return -EINVAL;
	}
	if (apply) {
		n->head = 0;
		n->count = nr;
		n->stats.carried_in = nr;
	}
	return 0;
}

int virtio_net_decode_carry(struct virtio_net *n, const void *buf, size_t len, uint32_t version,
			    char *why, size_t why_len)
{
	int ret;

	if (n->thread_started) {
		snprintf(why, why_len, "%s: device already started", n->carry_name);
		return -EBUSY;
	}
	pthread_mutex_lock(&n->lock);
	ret = carry_decode(n, buf, len, version, false, why, why_len);
	if (!ret)
		carry_decode(n, buf, len, version, true, why, why_len);
	pthread_mutex_unlock(&n->lock);
	return ret;
}

int virtio_net_save_state(struct virtio_net *n, struct gw_state *st)
{
	size_t cap = virtio_net_carry_max_bytes();
	struct gw_wbuf w;
	uint8_t *buf;
	int ret, state = virtio_net_run_state(n);

	if (state != NET_IDLE && state != NET_STOPPED)
		return -EBUSY;
	ret = virtio_mmio_save_state(&n->t, st);
	if (ret)
		return ret;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	gw_wbuf_init(&w, buf, cap);
	ret = virtio_net_encode_carry(n, &w);
	if (!ret)
		ret = gw_state_add(st, n->carry_name, VIRTIO_NET_CARRY_VERSION, buf, w.len);
	free(buf);
	return ret;
}

int virtio_net_load_state(struct virtio_net *n, struct gw_state *st)
{
	unsigned stale;
	char why[256];
	uint32_t version;
	size_t len;
	const void *p;
	int ret;

	if (n->thread_started)
		return gw_state_reject(st, -EBUSY, "%s: device already started", n->t.name);
	p = gw_state_find(st, n->carry_name, &version, &len);
	if (!p)
		return gw_state_reject(st, -EINVAL, "%s: no state section", n->carry_name);
	/* Check the frames first: the transport's load applies as soon as it passes. */
	pthread_mutex_lock(&n->lock);
	ret = carry_decode(n, p, len, version, false, why, sizeof(why));
	pthread_mutex_unlock(&n->lock);
	if (ret)
		return gw_state_reject(st, ret, "%s", why);
	ret = virtio_mmio_load_state(&n->t, st);
	if (ret)
		return ret;
	/*
	 * What this tap holds now came while the switch flooded the moved MAC
	 * to both hosts: each frame's copy reached the source's tap, which
	 * delivered it to the guest or carried it. Delivering these would
	 * duplicate them (docs/devices.md, "Frames the switch copied").
	 */
	stale = virtio_net_backend_drain(n, VNET_STALE_DRAIN_MAX);
	pthread_mutex_lock(&n->lock);
	carry_decode(n, p, len, version, true, why, sizeof(why));
	n->stats.rx_dropped_stale += stale;
	pthread_mutex_unlock(&n->lock);
	gw_log(GW_LOG_INFO, "virtio-net", "loaded", "dev=%s carried=%u stale_dropped=%u", n->t.name,
	       n->count, stale);
	return 0;
}
