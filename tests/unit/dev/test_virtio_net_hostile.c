/* SPDX-License-Identifier: MIT */
/*
 * Invariant: whatever the guest puts in its rings and whatever comes out
 * of the backend, virtio-net never writes outside a chain's writable
 * buffers, never sends a frame it should not, never hangs: a broken
 * chain puts the device in NEEDS_RESET (one log line, and it works again
 * after a reset), a frame that does not fit is dropped and counted, a
 * guest that posts no receive buffers fills the bounded FIFO and no more
 * (the rest stays in the backend), and stop returns. Hostile carry
 * sections are refused with nothing applied.
 *
 * Waits give up after 10 s; timing never decides.
 */
#include <stdatomic.h>
#include <sys/socket.h>
#include <godwit/log.h>
#include "netdrv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS))

static unsigned needs_reset_lines;
static long left_in_backend = -1;

static void sink(void *opaque, enum gw_log_level level, const char *line)
{
	const char *p;

	(void)opaque, (void)level;
	if (strstr(line, "needs_reset"))
		needs_reset_lines++;
	p = strstr(line, "left_in_backend=");
	if (p)
		left_in_backend = strtol(p + 16, NULL, 10);
	if (getenv("DRV_VERBOSE"))
		fprintf(stderr, "%s\n", line);
}

static void up(struct netdrv *d)
{
	netdrv_init(d, "virtio-net0");
	TEST_ASSERT(virtio_net_start(d->net) == 0, "start");
	TEST_ASSERT(netdrv_setup(d, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
}

static void send_frame(struct netdrv *d, uint32_t seq, uint32_t len)
{
	uint8_t f[4096];

	len = netdrv_frame_make(f, seq, len);
	TEST_ASSERT(send(d->peer, f, len, 0) == (ssize_t)len, "network send");
}

static bool wait_for(struct netdrv *d, bool (*cond)(struct netdrv *d))
{
	uint64_t until = netdrv_now_ns() + NETDRV_WAIT_NS;

	while (!cond(d))
		if (netdrv_now_ns() > until)
			return false;
	return true;
}

static bool is_reset(struct netdrv *d)
{
	return netdrv_needs_reset(d);
}

static bool rx_used(struct netdrv *d)
{
	return netdrv_used_idx(d, VIRTIO_NET_RXQ) != d->q[VIRTIO_NET_RXQ].used_seen;
}

static bool tx_used(struct netdrv *d)
{
	return netdrv_used_idx(d, VIRTIO_NET_TXQ) != d->q[VIRTIO_NET_TXQ].used_seen;
}

static struct virtio_net_stats stats(struct netdrv *d)
{
	struct virtio_net_stats s;

	virtio_net_get_stats(d->net, &s);
	return s;
}

static ssize_t net_recv(struct netdrv *d, uint8_t *f, size_t cap)
{
	return recv(d->peer, f, cap, MSG_DONTWAIT);
}

/* An rx chain shorter than the header: NEEDS_RESET; after a reset the frame still arrives. */
static void rx_shorter_than_header(void)
{
	struct netdrv d;
	uint8_t f[4096];
	unsigned lines = needs_reset_lines;

	up(&d);
	netdrv_desc(&d, VIRTIO_NET_RXQ, 0, 0, 8, VIRTQ_DESC_F_WRITE, 0);
	netdrv_offer(&d, VIRTIO_NET_RXQ, 0, true);
	send_frame(&d, 1, 100);
	TEST_CHECK(wait_for(&d, is_reset), "rx chain of 8 bytes: NEEDS_RESET");
	TEST_CHECK(needs_reset_lines == lines + 1, "one log line");
	TEST_CHECK(netdrv_used_idx(&d, VIRTIO_NET_RXQ) == 0, "no used entry");
	TEST_CHECK(atomic_load(&d.irq_level), "configuration interrupt");
	/* The frame waited in the FIFO: a reset driver gets it. */
	netdrv_setup(&d, FEATURES);
	netdrv_post_rx_all(&d);
	TEST_CHECK(wait_for(&d, rx_used), "frame after the reset");
	TEST_CHECK(netdrv_rx(&d, f, sizeof(f)) == 100 && netdrv_frame_check(f, 100) == 1,
		   "the frame intact");
	TEST_CHECK(!netdrv_needs_reset(&d) && d.dirty_outside == 0, "healthy again");
	netdrv_fini(&d);
}

/* A frame longer than the chain: dropped and counted, the chain serves the next frame. */
static void rx_frame_longer_than_chain(void)
{
	struct netdrv d;
	uint8_t f[4096], *buf;
	uint32_t id, len;

	up(&d);
	buf = netdrv_host(&d, netdrv_buf(VIRTIO_NET_RXQ, 0));
	memset(buf, 0xcc, 0x1000);
	netdrv_desc(&d, VIRTIO_NET_RXQ, 0, 0, VIRTIO_NET_HDR_BYTES + 60, VIRTQ_DESC_F_WRITE, 0);
	netdrv_offer(&d, VIRTIO_NET_RXQ, 0, true);
	send_frame(&d, 1, 200);
	send_frame(&d, 2, 50);
	TEST_CHECK(wait_for(&d, rx_used), "the short frame arrives");
	netdrv_used_elem(&d, VIRTIO_NET_RXQ, 0, &id, &len);
	TEST_CHECK(id == 0 && len == VIRTIO_NET_HDR_BYTES + 50, "in the same chain: id %u len %u",
		   id, len);
	TEST_CHECK(netdrv_frame_check(buf + VIRTIO_NET_HDR_BYTES, 50) == 2, "frame 2 intact");
	for (unsigned i = VIRTIO_NET_HDR_BYTES + 60; i < 0x1000; i++)
		if (buf[i] != 0xcc) {
			TEST_CHECK(0, "byte %u past the chain written", i);
			break;
		}
	TEST_CHECK(stats(&d).rx_dropped_too_long == 1, "one drop counted");
	TEST_CHECK(!netdrv_needs_reset(&d), "no reset for a long frame");
	/* Longer than the device takes at all, straight from the backend. */
	netdrv_used_elem(&d, VIRTIO_NET_RXQ, 0, &id, &len);
	(void)netdrv_rx(&d, f, sizeof(f));
	send_frame(&d, 3, VIRTIO_NET_FRAME_MAX_BYTES + 1);
	send_frame(&d, 4, 40);
	TEST_CHECK(wait_for(&d, rx_used), "the next frame arrives");
	TEST_CHECK(netdrv_rx(&d, f, sizeof(f)) == 40 && netdrv_frame_check(f, 40) == 4,
		   "frame 4 next");
	TEST_CHECK(stats(&d).rx_dropped_too_long == 2, "two drops counted");
	netdrv_fini(&d);
}

/* A tx chain with a device-writable buffer: NEEDS_RESET, nothing sent. */
static void tx_writable_descriptor(void)
{
	struct netdrv d;
	uint8_t f[4096];
	uint8_t *b;
	unsigned lines = needs_reset_lines;

	up(&d);
	b = netdrv_host(&d, netdrv_buf(VIRTIO_NET_TXQ, 0));
	memset(b, 0, VIRTIO_NET_HDR_BYTES);
	netdrv_frame_make(b + VIRTIO_NET_HDR_BYTES, 1, 100);
	netdrv_desc(&d, VIRTIO_NET_TXQ, 0, 0, VIRTIO_NET_HDR_BYTES + 100, VIRTQ_DESC_F_NEXT, 1);
	netdrv_desc(&d, VIRTIO_NET_TXQ, 1, 0, 64, VIRTQ_DESC_F_WRITE, 0);
	netdrv_offer(&d, VIRTIO_NET_TXQ, 0, true);
	TEST_CHECK(wait_for(&d, is_reset), "writable tx buffer: NEEDS_RESET");
	TEST_CHECK(needs_reset_lines == lines + 1, "one log line");
	TEST_CHECK(net_recv(&d, f, sizeof(f)) < 0 && errno == EAGAIN, "nothing sent");
	TEST_CHECK(netdrv_used_idx(&d, VIRTIO_NET_TXQ) == 0, "no used entry");
	netdrv_fini(&d);
}

/* Oversized, empty and offload-asking tx frames: dropped, pushed with 0, counted. */
static void tx_oversized(void)
{
	struct netdrv d;
	uint8_t f[4096];
	uint8_t *b0, *b1;
	uint32_t id, len;
	ssize_t n;

	up(&d);
	b0 = netdrv_host(&d, netdrv_buf(VIRTIO_NET_TXQ, 0));
	b1 = netdrv_host(&d, netdrv_buf(VIRTIO_NET_TXQ, 1));
	memset(b0, 0, 0x1000);
	memset(b1, 0, 0x1000);
	/* 12 + 3000 bytes over two readable descriptors. */
	netdrv_desc(&d, VIRTIO_NET_TXQ, 0, 0, 1500, VIRTQ_DESC_F_NEXT, 1);
	netdrv_desc(&d, VIRTIO_NET_TXQ, 1, 0, VIRTIO_NET_HDR_BYTES + 3000 - 1500, 0, 0);
	netdrv_offer(&d, VIRTIO_NET_TXQ, 0, true);
	TEST_CHECK(wait_for(&d, tx_used), "oversized chain used");
	netdrv_used_elem(&d, VIRTIO_NET_TXQ, 0, &id, &len);
	TEST_CHECK(id == 0 && len == 0, "used id %u len %u", id, len);
	d.q[VIRTIO_NET_TXQ].used_seen++;
	/* A header asking for a checksum the device did not offer. */
	b0 = netdrv_host(&d, netdrv_buf(VIRTIO_NET_TXQ, 2));
	memset(b0, 0, VIRTIO_NET_HDR_BYTES);
	b0[0] = 1;	/* VIRTIO_NET_HDR_F_NEEDS_CSUM */
	netdrv_frame_make(b0 + VIRTIO_NET_HDR_BYTES, 7, 100);
	netdrv_desc(&d, VIRTIO_NET_TXQ, 2, 0, VIRTIO_NET_HDR_BYTES + 100, 0, 0);
	netdrv_offer(&d, VIRTIO_NET_TXQ, 2, true);
	TEST_CHECK(wait_for(&d, tx_used), "checksum chain used");
	d.q[VIRTIO_NET_TXQ].used_seen++;
	/* Then a good one goes out, and only it. */
	netdrv_frame_make(f, 9, 80);
	TEST_ASSERT(netdrv_tx(&d, f, 80) == 0, "tx");
	TEST_CHECK(wait_for(&d, tx_used), "good chain used");
	n = net_recv(&d, f, sizeof(f));
	TEST_CHECK(n == 80 && netdrv_frame_check(f, 80) == 9, "the good frame, first (%zd)", n);
	TEST_CHECK(net_recv(&d, f, sizeof(f)) < 0, "and nothing else");
	TEST_CHECK(stats(&d).tx_dropped == 2 && stats(&d).tx_frames == 1, "2 dropped, 1 sent");
	TEST_CHECK(!netdrv_needs_reset(&d), "no reset");
	netdrv_fini(&d);
}

/* No rx buffers ever: the FIFO fills to its bound, the rest stays in the backend, stop returns. */
static void guest_never_posts_rx(void)
{
	struct netdrv d;
	uint64_t until;
	unsigned sent = 0;
	uint8_t f[128];
	uint64_t hash;

	up(&d);
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	/* Until the FIFO is full and the socket too (bounded: 4096 frames). */
	while (sent < 4096 && netdrv_now_ns() < until) {
		uint32_t len = netdrv_frame_make(f, sent, 100);

		if (send(d.peer, f, len, MSG_DONTWAIT) == (ssize_t)len)
			sent++;
		else if (stats(&d).backlog_frames == VIRTIO_NET_CARRY_MAX_FRAMES)
			break;
	}
	TEST_CHECK(stats(&d).backlog_frames == VIRTIO_NET_CARRY_MAX_FRAMES && sent > 256,
		   "FIFO %u of %u sent", stats(&d).backlog_frames, sent);
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	while (stats(&d).rx_backlog_full == 0 && netdrv_now_ns() < until)
		;
	TEST_CHECK(stats(&d).rx_backlog_full >= 1, "full counted");
	hash = netdrv_ram_hash(&d);
	TEST_CHECK(virtio_net_stop(d.net) == 0, "stop returns");
	TEST_CHECK(netdrv_ram_hash(&d) == hash && netdrv_used_idx(&d, VIRTIO_NET_RXQ) == 0,
		   "nothing written");
	left_in_backend = -1;
	virtio_net_destroy(d.net);
	d.net = NULL;
	TEST_CHECK(left_in_backend == (long)(sent - VIRTIO_NET_CARRY_MAX_FRAMES),
		   "close counts %ld left in the backend, %u expected", left_in_backend,
		   sent - VIRTIO_NET_CARRY_MAX_FRAMES);
	netdrv_fini(&d);
}

/* Hostile carry sections: refused, nothing applied; none once started. */
static void hostile_carry(void)
{
	struct netdrv d;
	uint8_t buf[4096];
	char why[256];
	struct {
		const char *what;
		uint32_t nr, reserved, flen, extra;
		uint32_t version;
	} cases[] = {
		{ "version 2", 1, 0, 60, 0, 2 },
		{ "too many frames", VIRTIO_NET_CARRY_MAX_FRAMES + 1, 0, 60, 0, 1 },
		{ "reserved set", 1, 1, 60, 0, 1 },
		{ "empty frame", 1, 0, 0, 0, 1 },
		{ "frame too long", 1, 0, VIRTIO_NET_FRAME_MAX_BYTES + 1, 0, 1 },
		{ "truncated", 2, 0, 60, 0, 1 },
		{ "trailing bytes", 1, 0, 60, 3, 1 },
	};

	netdrv_init(&d, "virtio-net0");
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct gw_wbuf w;
		uint32_t flen = cases[c].flen > 3000 ? 3000 : cases[c].flen;

		gw_wbuf_init(&w, buf, sizeof(buf));
		gw_put_le32(&w, cases[c].nr);
		gw_put_le32(&w, cases[c].reserved);
		gw_put_le16(&w, (uint16_t)cases[c].flen);
		memset(buf + w.len, 0x11, flen);
		w.len += cases[c].flen <= VIRTIO_NET_FRAME_MAX_BYTES ? flen : 0;
		w.len += cases[c].extra;
		TEST_CHECK(virtio_net_decode_carry(d.net, buf, w.len, cases[c].version, why,
						   sizeof(why)) == -EINVAL, "%s accepted", cases[c].what);
		TEST_CHECK(stats(&d).backlog_frames == 0, "%s: applied", cases[c].what);
	}
	{
		struct gw_wbuf w;

		gw_wbuf_init(&w, buf, sizeof(buf));
		gw_put_le32(&w, 1);
		gw_put_le32(&w, 0);
		gw_put_le16(&w, 60);
		w.len += 60;
		TEST_CHECK(virtio_net_decode_carry(d.net, buf, w.len, 1, why, sizeof(why)) == 0,
			   "a good one: %s", why);
		TEST_CHECK(stats(&d).backlog_frames == 1, "applied");
		TEST_ASSERT(virtio_net_start(d.net) == 0, "start");
		TEST_CHECK(virtio_net_decode_carry(d.net, buf, w.len, 1, why, sizeof(why)) == -EBUSY,
			   "refused once started");
	}
	netdrv_fini(&d);
}

int main(void)
{
	gw_log_set_sink(sink, NULL);
	gw_log_set_level(GW_LOG_INFO);	/* the line looked for is INFO */
	rx_shorter_than_header();
	rx_frame_longer_than_chain();
	tx_writable_descriptor();
	tx_oversized();
	guest_never_posts_rx();
	hostile_carry();
	TEST_EXIT();
}
