/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the tap backend moves frames both ways, and frames that reach
 * the source's tap after the pause are delivered by the destination, in
 * order, before the destination's own.
 *
 * In a fresh network namespace (root or CAP_NET_ADMIN, else skip 77) with
 * IPv6 off (no kernel chatter), the device opens a new tap (IFF_TAP |
 * IFF_NO_PI), the interface goes up, and a packet socket bound to it plays
 * the network:
 * 1. a frame it sends reaches the guest's receive ring, a frame the guest
 *    sends reaches it, both intact;
 * 2. the source device stops, 10 frames reach its tap (carried), the
 *    sections go to a second device on a second tap (the destination),
 *    which starts; 10 more frames reach the destination's tap. The guest
 *    receives the 20, in order, once.
 * A wait gives up after 10 s; timing never decides.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "netdrv.h"
#include "test_util.h"
#include "util/state.h"

TEST_DEFINE_FAILURES;

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS) | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX))

struct side {
	struct netdrv d;
	int ps;				/* packet socket on the tap */
	struct sockaddr_ll sll;
};

static void sysctl_write(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, v, strlen(v)) < 0) {
			/* without it the guest may see some IPv6 frames: they are skipped */
		}
		close(fd);
	}
}

static void link_up(const char *ifname)
{
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	TEST_ASSERT(s >= 0, "socket");
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	TEST_ASSERT(ioctl(s, SIOCGIFFLAGS, &ifr) == 0, "SIOCGIFFLAGS");
	ifr.ifr_flags |= IFF_UP;
	TEST_ASSERT(ioctl(s, SIOCSIFFLAGS, &ifr) == 0, "SIOCSIFFLAGS");
	close(s);
}

static void side_open(struct side *s, const char *ifname)
{
	unsigned ifindex;

	if (!netdrv_init_tap(&s->d, "virtio-net0", ifname))
		test_skip("cannot open a tap (%s)", strerror(errno));
	TEST_CHECK(strcmp(virtio_net_ifname(s->d.net), ifname) == 0, "attached to %s",
		   virtio_net_ifname(s->d.net));
	link_up(ifname);
	ifindex = if_nametoindex(ifname);
	TEST_ASSERT(ifindex, "ifindex");
	s->ps = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(NETDRV_ETHERTYPE));
	TEST_ASSERT(s->ps >= 0, "packet socket");
	memset(&s->sll, 0, sizeof(s->sll));
	s->sll.sll_family = AF_PACKET;
	s->sll.sll_protocol = htons(NETDRV_ETHERTYPE);
	s->sll.sll_ifindex = (int)ifindex;
	TEST_ASSERT(bind(s->ps, (struct sockaddr *)&s->sll, sizeof(s->sll)) == 0, "bind");
}

static void side_close(struct side *s)
{
	close(s->ps);
	netdrv_fini(&s->d);
}

/* The network sends frame @seq into the tap. */
static void tap_send(struct side *s, uint32_t seq)
{
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
	uint32_t len = netdrv_frame_make(f, seq, 100 + seq * 13 % 1000);

	s->sll.sll_halen = ETH_ALEN;
	memcpy(s->sll.sll_addr, f, ETH_ALEN);
	TEST_ASSERT(sendto(s->ps, f, len, 0, (struct sockaddr *)&s->sll, sizeof(s->sll)) ==
		    (ssize_t)len, "send into the tap");
}

/* The guest's next test frame (others skipped): its number, -1 corrupt, -2 none in 10 s. */
static int64_t guest_next(struct netdrv *d)
{
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
	uint64_t until = netdrv_now_ns() + NETDRV_WAIT_NS;

	while (netdrv_now_ns() < until) {
		int n = netdrv_rx(d, f, sizeof(f));

		TEST_ASSERT(n >= 0, "bad receive entry");
		if (n > 0 && f[12] == (NETDRV_ETHERTYPE >> 8) && f[13] == (NETDRV_ETHERTYPE & 0xff))
			return netdrv_frame_check(f, (uint32_t)n);
	}
	return -2;
}

static void both_ways(struct side *s)
{
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
	uint64_t until;
	bool got = false;
	uint32_t len;

	tap_send(s, 42);
	TEST_CHECK(guest_next(&s->d) == 42, "the frame reached the guest");
	len = netdrv_frame_make(f, 43, 200);
	TEST_ASSERT(netdrv_tx(&s->d, f, len) == 0, "tx");
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	while (!got && netdrv_now_ns() < until) {
		ssize_t n = recv(s->ps, f, sizeof(f), MSG_DONTWAIT);

		if (n > 0) {
			TEST_CHECK(n == 200 && netdrv_frame_check(f, 200) == 43, "frame %zd bytes", n);
			got = true;
		}
	}
	TEST_CHECK(got, "the guest's frame reached the network");
}

static void carried_across(struct side *src, struct side *dst)
{
	struct gw_state *st = calloc(1, sizeof(*st));
	struct virtio_net_stats s;
	uint64_t until;

	TEST_ASSERT(st, "state");
	TEST_ASSERT(virtio_net_stop(src->d.net) == 0, "stop");
	for (uint32_t seq = 100; seq < 110; seq++)
		tap_send(src, seq);
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	do {
		virtio_net_get_stats(src->d.net, &s);
		TEST_ASSERT(netdrv_now_ns() < until, "source FIFO holds %u of 10", s.backlog_frames);
	} while (s.backlog_frames < 10);
	gw_state_init(st);
	TEST_ASSERT(virtio_net_save_state(src->d.net, st) == 0, "save");
	netdrv_copy_guest(&dst->d, &src->d);
	TEST_ASSERT(virtio_net_load_state(dst->d.net, st) == 0, "load: %s", st->reject_reason);
	/* The switch has learned the new port: frames now reach the destination's tap. */
	for (uint32_t seq = 110; seq < 120; seq++)
		tap_send(dst, seq);
	TEST_ASSERT(virtio_net_start(dst->d.net) == 0, "start the destination");
	for (int64_t seq = 100; seq < 120; seq++) {
		int64_t got = guest_next(&dst->d);

		TEST_CHECK(got == seq, "guest got %lld, expected %lld", (long long)got, (long long)seq);
		if (got != seq)
			break;
	}
	TEST_CHECK(!netdrv_needs_reset(&dst->d), "destination healthy");
	gw_state_release(st);
	free(st);
}

int main(void)
{
	static struct side src, dst;

	if (unshare(CLONE_NEWNET))
		test_skip("no new network namespace (%s): needs CAP_SYS_ADMIN", strerror(errno));
	sysctl_write("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
	sysctl_write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	side_open(&src, "gwtap0");
	side_open(&dst, "gwtap1");
	TEST_ASSERT(virtio_net_start(src.d.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&src.d, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	netdrv_post_rx_all(&src.d);
	both_ways(&src);
	printf("tap gwtap0: a frame each way\n");
	carried_across(&src, &dst);
	printf("tap gwtap0 -> gwtap1: 10 frames carried, then 10 from the new tap, in order\n");
	side_close(&src);
	side_close(&dst);
	TEST_EXIT();
}
