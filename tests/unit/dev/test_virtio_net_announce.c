/* SPDX-License-Identifier: MIT */
/*
 * virtio_net_send_raw and the announcer over a running virtio-net device
 * (the socketpair backend: the network is the test's end).
 *
 * Invariants:
 * 1. While the guest sends numbered frames through the device's I/O
 *    thread, another thread's raw frames reach the network too: every
 *    guest frame once, in order, intact, and every raw frame whole (one
 *    message each: they never interleave with the guest's).
 * 2. The announcer over virtio_net_announce_add: R rounds, R RARP frames
 *    from the device's MAC reach the network.
 * 3. Refusals: a length below 14 or above the device's maximum (-EINVAL);
 *    a stopped device (-EBUSY: a paused source stays silent).
 * 4. A network that stops reading: send_raw returns -EAGAIN after a
 *    bounded wait, never blocks.
 *
 * Timing never decides: a stall fails only after 10 s.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include "dev/announce.h"
#include "netdrv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS) | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX))
#define GUEST_FRAMES 2000u
#define RAW_FRAMES 500u

struct raw_ctx {
	struct virtio_net *net;
	unsigned sent, eagain;
	int error;
};

static void *raw_main(void *arg)
{
	struct raw_ctx *c = arg;
	uint8_t mac[6], f[VMM_ANNOUNCE_FRAME_BYTES];

	virtio_net_mac(c->net, mac);
	vmm_announce_rarp(f, mac);
	while (c->sent < RAW_FRAMES) {
		int ret = virtio_net_send_raw(c->net, f, sizeof(f));

		if (ret == -EAGAIN) {
			c->eagain++;		/* the test's end reads slower: try again */
			continue;
		}
		if (ret) {
			c->error = ret;
			break;
		}
		c->sent++;
	}
	return NULL;
}

static bool is_rarp(const uint8_t *f, ssize_t len, const uint8_t mac[6])
{
	uint8_t want[VMM_ANNOUNCE_FRAME_BYTES];

	vmm_announce_rarp(want, mac);
	return len == VMM_ANNOUNCE_FRAME_BYTES && !memcmp(f, want, sizeof(want));
}

static void raw_beside_guest(void)
{
	struct netdrv d;
	struct raw_ctx c = { 0 };
	uint8_t mac[6], f[4096];
	uint32_t tx_sent = 0, tx_got = 0, raw_got = 0, bad = 0;
	uint64_t until;
	pthread_t th;

	netdrv_init(&d, "virtio-net0");
	TEST_ASSERT(virtio_net_start(d.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&d, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	virtio_net_mac(d.net, mac);
	c.net = d.net;
	TEST_ASSERT(pthread_create(&th, NULL, raw_main, &c) == 0, "raw thread");
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	while (tx_got < GUEST_FRAMES || raw_got < RAW_FRAMES) {
		ssize_t n;
		uint32_t before = tx_got + raw_got;

		netdrv_tx_reclaim(&d);
		while (tx_sent < GUEST_FRAMES) {
			uint8_t g[2048];
			uint32_t len = netdrv_frame_make(g, tx_sent, 60 + tx_sent * 13 % 1400);

			if (netdrv_tx(&d, g, len))
				break;
			tx_sent++;
		}
		while ((n = recv(d.peer, f, sizeof(f), MSG_DONTWAIT)) > 0) {
			int64_t seq;

			if (is_rarp(f, n, mac)) {
				raw_got++;
				continue;
			}
			seq = netdrv_frame_check(f, (uint32_t)n);
			if (seq != (int64_t)tx_got)
				bad++;
			tx_got++;
		}
		if (tx_got + raw_got != before)
			until = netdrv_now_ns() + NETDRV_WAIT_NS;
		TEST_ASSERT(netdrv_now_ns() < until && !c.error, "stalled: guest %u/%u raw %u "
			    "error %d", tx_got, tx_sent, raw_got, c.error);
		poll(&(struct pollfd){ .fd = d.peer, .events = POLLIN }, 1, 1);
	}
	pthread_join(th, NULL);
	TEST_CHECK(bad == 0, "%u guest frames wrong or out of order", bad);
	TEST_CHECK(raw_got == RAW_FRAMES && c.sent == RAW_FRAMES, "raw %u of %u", raw_got, c.sent);
	TEST_CHECK(!netdrv_needs_reset(&d), "no reset");
	printf("raw beside guest: %u guest frames, %u raw frames, %u EAGAIN\n", tx_got, raw_got,
	       c.eagain);

	/* 2. the announcer, 3 rounds of tiny delays */
	{
		struct vmm_announce_params p = { .initial_ms = 1, .max_ms = 2, .rounds = 3,
						 .step_ms = 1 };
		struct vmm_announce_stats st;
		struct vmm_announce *a = vmm_announce_new(&p);
		unsigned got = 0;

		TEST_ASSERT(a, "announcer");
		TEST_CHECK(virtio_net_announce_add(a, d.net) == 0, "add the device");
		TEST_ASSERT(vmm_announce_start(a) == 0, "start");
		TEST_ASSERT(vmm_announce_wait(a, NETDRV_WAIT_NS) == 0, "done");
		vmm_announce_get_stats(a, &st);
		vmm_announce_destroy(a);
		for (;;) {
			ssize_t n = recv(d.peer, f, sizeof(f), MSG_DONTWAIT);

			if (n <= 0)
				break;
			got += is_rarp(f, n, mac);
		}
		TEST_CHECK(got == 3 && st.frames_sent == 3 && st.rounds == 3,
			   "announce: %u RARP frames on the wire, %llu sent", got,
			   (unsigned long long)st.frames_sent);
	}

	/* 3. refusals */
	TEST_CHECK(virtio_net_send_raw(d.net, f, 13) == -EINVAL, "13 bytes");
	TEST_CHECK(virtio_net_send_raw(d.net, f, VIRTIO_NET_FRAME_MAX_BYTES + 1) == -EINVAL,
		   "too long");
	TEST_ASSERT(virtio_net_stop(d.net) == 0, "stop");
	TEST_CHECK(virtio_net_send_raw(d.net, f, 60) == -EBUSY, "a stopped device sent");
	TEST_ASSERT(virtio_net_resume(d.net) == 0, "resume");
	TEST_CHECK(virtio_net_send_raw(d.net, f, 60) == 0, "resumed: sends again");
	netdrv_fini(&d);
}

/* 4. a network that never reads: -EAGAIN, bounded */
static void eagain(void)
{
	struct netdrv d;
	uint8_t f[VMM_ANNOUNCE_FRAME_BYTES], mac[6];
	unsigned ok = 0;
	int ret = 0;

	netdrv_init_sndbuf(&d, "virtio-net0", 4096);
	TEST_ASSERT(virtio_net_start(d.net) == 0, "start");
	virtio_net_mac(d.net, mac);
	vmm_announce_rarp(f, mac);
	while (ok < 100000 && (ret = virtio_net_send_raw(d.net, f, sizeof(f))) == 0)
		ok++;
	TEST_CHECK(ret == -EAGAIN, "after %u frames: %d", ok, ret);
	printf("eagain: after %u frames\n", ok);
	netdrv_fini(&d);
}

int main(void)
{
	raw_beside_guest();
	eagain();
	TEST_EXIT();
}
