/* SPDX-License-Identifier: MIT */
/*
 * Invariant: virtio-net moves frames both ways exactly once, in order,
 * unchanged, and a pause in the middle of the stream loses or repeats
 * none of them, whether the device then migrates or resumes.
 *
 * A fake guest (netdrv.c, this thread) and "the network" (the other end
 * of the device's socketpair backend, this thread too) exchange numbered,
 * patterned frames of varying length with the device on its I/O thread:
 *
 * 1. flow: 10000 frames each way; every received frame is the next
 *    number, intact, with the zero header (num_buffers 1), every byte the
 *    device wrote reported dirty.
 * 2. migrate: the same stream, paused after ~5000 each way with frames in
 *    flight in both directions; after virtio_net_stop 100 more frames
 *    reach the source's backend (the carry FIFO takes them); both sections
 *    are saved, guest RAM copied, a second device (the destination, its
 *    own socketpair) loads them and starts; the stream goes on there to
 *    10000. Every frame arrives once, in order, across the two devices,
 *    the interrupt status (and line) is the source's,
 *    the guest never resets, and the source's RAM is unchanged after its
 *    stop (no device write behind the pause).
 * 3. resume: the same pause and save, then the migration "fails": the
 *    source resumes and the stream goes on there, exactly once, in order.
 * 4. tx blocked: the network stops reading, the backend says EAGAIN, the
 *    device gives the chain back; paused and migrated there, the
 *    destination sends the rest: 64 frames, once each, in order.
 *
 * Timing never decides: a stall fails only after 10 s.
 */
#include <stdatomic.h>
#include <sys/socket.h>
#include "netdrv.h"
#include "test_util.h"
#include "util/state.h"

TEST_DEFINE_FAILURES;

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS) | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX))
#define FRAMES 10000u
#define PAUSE_AT 5000u
#define WINDOW 128u		/* network frames in flight towards the guest */
#define LATE 100u		/* frames reaching the source after its stop */

struct flow {
	uint32_t rx_sent, rx_got;	/* network -> guest */
	uint32_t tx_sent, tx_got;	/* guest -> network */
	unsigned bad;
};

static uint32_t frame_len(uint32_t seq)
{
	return 60 + seq * 7 % 1455;
}

static bool net_send(int peer, uint32_t seq)
{
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
	uint32_t len = netdrv_frame_make(f, seq, frame_len(seq));

	return send(peer, f, len, MSG_DONTWAIT) == (ssize_t)len;
}

/* Frames sent by the device to the network: each must be the next one. */
static void net_recv_all(int peer, struct flow *fl)
{
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES + 1];
	ssize_t n;

	while ((n = recv(peer, f, sizeof(f), MSG_DONTWAIT)) > 0) {
		int64_t seq = netdrv_frame_check(f, (uint32_t)n);

		if (seq != fl->tx_got) {
			if (fl->bad++ < 10)
				fprintf(stderr, "network got %lld, expected %u\n", (long long)seq,
					fl->tx_got);
		}
		fl->tx_got++;
	}
}

static void guest_recv_all(struct netdrv *d, struct flow *fl)
{
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
	int n;

	while ((n = netdrv_rx(d, f, sizeof(f))) != 0) {
		int64_t seq = n < 0 ? -2 : netdrv_frame_check(f, (uint32_t)n);

		if (seq != fl->rx_got) {
			if (fl->bad++ < 10)
				fprintf(stderr, "guest got %lld, expected %u\n", (long long)seq,
					fl->rx_got);
		}
		fl->rx_got++;
	}
}

/* One round: the network sends (windowed), the guest takes and sends, the network takes. */
static void pump(struct netdrv *d, struct flow *fl, uint32_t rx_limit, uint32_t tx_limit)
{
	while (fl->rx_sent < rx_limit && fl->rx_sent - fl->rx_got < WINDOW &&
	       net_send(d->peer, fl->rx_sent))
		fl->rx_sent++;
	guest_recv_all(d, fl);
	netdrv_tx_reclaim(d);
	while (fl->tx_sent < tx_limit) {
		uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
		uint32_t len = netdrv_frame_make(f, fl->tx_sent, frame_len(fl->tx_sent));

		if (netdrv_tx(d, f, len))
			break;
		fl->tx_sent++;
	}
	net_recv_all(d->peer, fl);
}

static void run_until(struct netdrv *d, struct flow *fl, uint32_t rx, uint32_t tx)
{
	uint64_t until = netdrv_now_ns() + NETDRV_WAIT_NS;
	uint32_t last = 0;

	while ((fl->rx_got < rx || fl->tx_got < tx) && !fl->bad) {
		pump(d, fl, rx, tx);
		if (fl->rx_got + fl->tx_got != last) {
			last = fl->rx_got + fl->tx_got;
			until = netdrv_now_ns() + NETDRV_WAIT_NS;
		}
		TEST_ASSERT(netdrv_now_ns() < until, "stalled: rx %u/%u sent %u, tx %u/%u sent %u",
			    fl->rx_got, rx, fl->rx_sent, fl->tx_got, tx, fl->tx_sent);
	}
}

static void test_flow(void)
{
	struct netdrv d;
	struct flow fl = { 0 };
	struct virtio_net_stats s;

	netdrv_init(&d, "virtio-net0");
	TEST_ASSERT(virtio_net_start(d.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&d, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	netdrv_post_rx_all(&d);
	run_until(&d, &fl, FRAMES, FRAMES);
	virtio_net_get_stats(d.net, &s);
	TEST_CHECK(fl.bad == 0, "%u frames wrong", fl.bad);
	TEST_CHECK(s.rx_frames == FRAMES && s.tx_frames == FRAMES && !s.rx_dropped_too_long &&
		   !s.tx_dropped, "stats rx %llu tx %llu", (unsigned long long)s.rx_frames,
		   (unsigned long long)s.tx_frames);
	TEST_CHECK(!netdrv_needs_reset(&d) && d.dirty_outside == 0, "no reset, no dirty outside");
	TEST_CHECK(atomic_load(&d.irq_raises) > 0, "interrupts raised");
	netdrv_fini(&d);
	printf("flow: %u frames each way\n", FRAMES);
}

/* Pause mid-stream with frames in flight, LATE more reaching the stopped source. */
static void pause_mid_stream(struct netdrv *src, struct flow *fl, struct gw_state *st,
			     uint64_t *hash)
{
	struct virtio_net_stats s;
	uint64_t until;
	uint32_t want;

	run_until(src, fl, PAUSE_AT, PAUSE_AT);
	/* Frames in flight both ways: sent, not taken yet. */
	for (unsigned i = 0; i < 3; i++)
		pump(src, fl, FRAMES, FRAMES);
	TEST_ASSERT(virtio_net_stop(src->net) == 0, "stop");
	/* The guest is paused from here; only the network goes on. */
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	for (unsigned i = 0; i < LATE; i++) {
		/* The stopped device still reads its backend: the socket's room comes back. */
		while (!net_send(src->peer, fl->rx_sent))
			TEST_ASSERT(errno == EAGAIN && netdrv_now_ns() < until, "late frame %u", i);
		fl->rx_sent++;
	}
	/* In flight towards the guest: in its used ring already (unseen), or to be carried. */
	want = fl->rx_sent - fl->rx_got -
	       (uint16_t)(netdrv_used_idx(src, VIRTIO_NET_RXQ) - src->q[VIRTIO_NET_RXQ].used_seen);
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	do {
		virtio_net_get_stats(src->net, &s);
		TEST_ASSERT(netdrv_now_ns() < until, "FIFO holds %u of %u", s.backlog_frames, want);
	} while (s.backlog_frames < want);
	/* What the source sent before its stop reaches the network now. */
	net_recv_all(src->peer, fl);
	*hash = netdrv_ram_hash(src);
	gw_state_init(st);
	TEST_ASSERT(virtio_net_save_state(src->net, st) == 0, "save");
	virtio_net_get_stats(src->net, &s);
	TEST_CHECK(s.carried_out == want && want >= LATE, "carried %llu of %u",
		   (unsigned long long)s.carried_out, want);
	printf("paused at rx %u/%u tx %u/%u, %u frames carried, %u tx chains not reclaimed\n",
	       fl->rx_got, fl->rx_sent, fl->tx_got, fl->tx_sent, want, netdrv_tx_in_flight(src));
}

static void test_migrate(void)
{
	static struct netdrv src, dst;
	struct gw_state *st = calloc(1, sizeof(*st));
	struct flow fl = { 0 };
	struct virtio_net_stats s;
	uint64_t hash, carried;
	uint32_t isr;

	TEST_ASSERT(st, "state");
	netdrv_init(&src, "virtio-net0");
	TEST_ASSERT(virtio_net_start(src.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&src, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	netdrv_post_rx_all(&src);
	pause_mid_stream(&src, &fl, st, &hash);

	isr = netdrv_rd(&src, VIRTIO_MMIO_INTERRUPT_STATUS);
	netdrv_init(&dst, "virtio-net0");
	netdrv_copy_guest(&dst, &src);
	TEST_ASSERT(virtio_net_load_state(dst.net, st) == 0, "load: %s", st->reject_reason);
	/* A pending interrupt stays pending: the destination's line is as the source's. */
	TEST_CHECK(netdrv_rd(&dst, VIRTIO_MMIO_INTERRUPT_STATUS) == isr &&
		   atomic_load(&dst.irq_level) == (isr != 0), "interrupt status %#x carried", isr);
	TEST_ASSERT(virtio_net_start(dst.net) == 0, "start the destination");
	/* The guest goes on without a reset; the network now reaches the destination. */
	TEST_CHECK(netdrv_rd(&dst, VIRTIO_MMIO_STATUS) ==
		   (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
		    VIRTIO_STATUS_DRIVER_OK), "status carried");
	netdrv_tx_reclaim(&dst);
	run_until(&dst, &fl, FRAMES, FRAMES);
	TEST_CHECK(fl.bad == 0, "%u frames wrong across the migration", fl.bad);
	TEST_CHECK(fl.rx_got == FRAMES && fl.tx_got == FRAMES, "rx %u tx %u", fl.rx_got, fl.tx_got);
	virtio_net_get_stats(src.net, &s);
	carried = s.carried_out;
	virtio_net_get_stats(dst.net, &s);
	TEST_CHECK(s.carried_in == carried && carried >= LATE, "destination took %llu of %llu "
		   "carried frames", (unsigned long long)s.carried_in, (unsigned long long)carried);
	TEST_CHECK(!netdrv_needs_reset(&dst) && dst.dirty_outside == 0, "destination healthy");
	/* The source touched no guest RAM after its stop, frames arriving or not. */
	TEST_CHECK(netdrv_ram_hash(&src) == hash, "source RAM changed after the stop");
	netdrv_fini(&src);
	netdrv_fini(&dst);
	gw_state_release(st);
	free(st);
	printf("migrate: %u frames each way across two devices\n", FRAMES);
}

static void test_resume(void)
{
	static struct netdrv src;
	struct gw_state *st = calloc(1, sizeof(*st));
	struct flow fl = { 0 };
	uint64_t hash;

	TEST_ASSERT(st, "state");
	netdrv_init(&src, "virtio-net0");
	TEST_ASSERT(virtio_net_start(src.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&src, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	netdrv_post_rx_all(&src);
	pause_mid_stream(&src, &fl, st, &hash);
	/* The migration failed: the source carries on, carried frames first. */
	TEST_ASSERT(virtio_net_resume(src.net) == 0, "resume");
	TEST_CHECK(virtio_net_save_state(src.net, st) == -EBUSY, "no save while running");
	run_until(&src, &fl, FRAMES, FRAMES);
	TEST_CHECK(fl.bad == 0, "%u frames wrong across the failed migration", fl.bad);
	TEST_CHECK(!netdrv_needs_reset(&src), "no reset");
	netdrv_fini(&src);
	gw_state_release(st);
	free(st);
	printf("resume: %u frames each way, the migration failed\n", FRAMES);
}

/*
 * The network stops reading: the source's backend says EAGAIN and the
 * device gives the chain back to the ring. Paused there and migrated, the
 * destination sends what the source had not: each frame once, in order.
 */
static void test_tx_blocked(void)
{
	static struct netdrv src, dst;
	struct gw_state *st = calloc(1, sizeof(*st));
	struct flow fl = { 0 };
	struct virtio_net_stats s;
	uint64_t until;
	uint16_t used, stable = 0;

	TEST_ASSERT(st, "state");
	netdrv_init_sndbuf(&src, "virtio-net0", 8192);	/* a few frames, then EAGAIN */
	TEST_ASSERT(virtio_net_start(src.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&src, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	for (uint32_t i = 0; i < NETDRV_NUM; i++) {
		uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];

		TEST_ASSERT(netdrv_tx(&src, f, netdrv_frame_make(f, i, 1500)) == 0, "tx %u", i);
		fl.tx_sent++;
	}
	/* Until the device makes no progress (the socket is full); coverage, not a verdict. */
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	used = netdrv_used_idx(&src, VIRTIO_NET_TXQ);
	while (stable < 20000 && used != NETDRV_NUM && netdrv_now_ns() < until) {
		uint16_t now = netdrv_used_idx(&src, VIRTIO_NET_TXQ);

		stable = now == used ? stable + 1 : 0;
		used = now;
	}
	TEST_ASSERT(virtio_net_stop(src.net) == 0, "stop");
	virtio_net_get_stats(src.net, &s);
	net_recv_all(src.peer, &fl);
	TEST_CHECK(fl.tx_got == s.tx_frames, "the network got %u of the %llu sent", fl.tx_got,
		   (unsigned long long)s.tx_frames);
	gw_state_init(st);
	TEST_ASSERT(virtio_net_save_state(src.net, st) == 0, "save");
	netdrv_init(&dst, "virtio-net0");
	netdrv_copy_guest(&dst, &src);
	TEST_ASSERT(virtio_net_load_state(dst.net, st) == 0, "load: %s", st->reject_reason);
	TEST_ASSERT(virtio_net_start(dst.net) == 0, "start the destination");
	run_until(&dst, &fl, 0, NETDRV_NUM);
	TEST_CHECK(fl.bad == 0 && fl.tx_got == NETDRV_NUM, "%u wrong, %u of %u", fl.bad, fl.tx_got,
		   NETDRV_NUM);
	net_recv_all(dst.peer, &fl);
	TEST_CHECK(fl.tx_got == NETDRV_NUM, "no frame twice (%u)", fl.tx_got);
	printf("tx blocked: the source sent %llu, the destination %u\n",
	       (unsigned long long)s.tx_frames, NETDRV_NUM - (unsigned)s.tx_frames);
	netdrv_fini(&src);
	netdrv_fini(&dst);
	gw_state_release(st);
	free(st);
}

int main(void)
{
	test_flow();
	test_migrate();
	test_resume();
	test_tx_blocked();
	TEST_EXIT();
}
