/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the tap backend moves frames both ways. In a fresh network
 * namespace (root or CAP_NET_ADMIN, else skip 77) the device opens a new
 * tap (IFF_TAP | IFF_NO_PI), the interface goes up, and a packet socket
 * bound to it plays the network: a frame it sends reaches the guest's
 * receive ring, a frame the guest sends reaches it, both intact. Frames
 * of other ethertypes (the kernel's own IPv6 chatter) are ignored.
 * A wait gives up after 10 s; timing never decides.
 */
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "netdrv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS))
#define IFNAME "gwtap0"

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

int main(void)
{
	struct netdrv d;
	struct sockaddr_ll sll = { 0 };
	uint8_t f[VIRTIO_NET_FRAME_MAX_BYTES];
	uint64_t until;
	bool got = false;
	unsigned ifindex;
	uint32_t len;
	int ps;

	if (unshare(CLONE_NEWNET))
		test_skip("no new network namespace (%s): needs CAP_SYS_ADMIN", strerror(errno));
	if (!netdrv_init_tap(&d, "virtio-net0", IFNAME))
		test_skip("cannot open a tap (%s)", strerror(errno));
	TEST_CHECK(strcmp(virtio_net_ifname(d.net), IFNAME) == 0, "attached to %s",
		   virtio_net_ifname(d.net));
	link_up(IFNAME);
	ifindex = if_nametoindex(IFNAME);
	TEST_ASSERT(ifindex, "ifindex");
	ps = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(NETDRV_ETHERTYPE));
	TEST_ASSERT(ps >= 0, "packet socket");
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(NETDRV_ETHERTYPE);
	sll.sll_ifindex = (int)ifindex;
	TEST_ASSERT(bind(ps, (struct sockaddr *)&sll, sizeof(sll)) == 0, "bind");
	TEST_ASSERT(virtio_net_start(d.net) == 0, "start");
	TEST_ASSERT(netdrv_setup(&d, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	netdrv_post_rx_all(&d);

	/* network -> tap -> guest */
	len = netdrv_frame_make(f, 42, 300);
	sll.sll_halen = ETH_ALEN;
	memcpy(sll.sll_addr, f, ETH_ALEN);
	TEST_ASSERT(sendto(ps, f, len, 0, (struct sockaddr *)&sll, sizeof(sll)) == (ssize_t)len,
		    "send into the tap");
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	while (!got && netdrv_now_ns() < until) {
		int n = netdrv_rx(&d, f, sizeof(f));

		TEST_ASSERT(n >= 0, "bad receive entry");
		if (n > 0 && f[12] == (NETDRV_ETHERTYPE >> 8) && f[13] == (NETDRV_ETHERTYPE & 0xff)) {
			TEST_CHECK(n == 300 && netdrv_frame_check(f, 300) == 42, "frame %d bytes", n);
			got = true;
		}
	}
	TEST_CHECK(got, "the frame reached the guest");

	/* guest -> tap -> network */
	len = netdrv_frame_make(f, 43, 200);
	TEST_ASSERT(netdrv_tx(&d, f, len) == 0, "tx");
	got = false;
	until = netdrv_now_ns() + NETDRV_WAIT_NS;
	while (!got && netdrv_now_ns() < until) {
		ssize_t n = recv(ps, f, sizeof(f), MSG_DONTWAIT);

		if (n > 0) {
			TEST_CHECK(n == 200 && netdrv_frame_check(f, 200) == 43, "frame %zd bytes", n);
			got = true;
		}
	}
	TEST_CHECK(got, "the guest's frame reached the network");
	TEST_CHECK(!netdrv_needs_reset(&d) && d.dirty_outside == 0, "healthy");
	close(ps);
	netdrv_fini(&d);
	printf("tap %s: a frame each way\n", IFNAME);
	TEST_EXIT();
}
