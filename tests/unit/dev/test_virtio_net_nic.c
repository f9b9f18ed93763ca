/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the --nic option is parsed exactly ("tap=IFNAME[,mac=MAC]",
 * anything else refused with a reason), and the net part of the device's
 * state section is checked: a hostile MAC-and-status part is refused with
 * nothing applied, a good one round-trips (the destination takes the
 * source's MAC, which the guest has read).
 */
#include <sys/socket.h>
#include "netdrv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS))

static void parse(void)
{
	static const char *const bad[] = {
		"", "tap=", "mac=52:54:00:12:34:56", "tap=a,mac=52:54:00:12:34", "tap=a,mac=53:54:00:12:34:56",
		"tap=a,mac=52:54:00:12:34:5g", "tap=a,mac=52-54-00-12-34-56", "tap=a,vhost=on",
		"tap=0123456789abcdef", "tap=a/b", "tap=a b", "tap", "tap=a,", ",tap=a",
	};
	struct virtio_net_nic nic;
	char why[200];

	TEST_CHECK(virtio_net_parse_nic("tap=gw0", &nic, why, sizeof(why)) == 0 &&
		   !strcmp(nic.ifname, "gw0") && !nic.mac_set, "tap=gw0");
	TEST_CHECK(virtio_net_parse_nic("tap=gwtap-src1,mac=02:AB:cd:00:00:01", &nic, why,
					sizeof(why)) == 0 && !strcmp(nic.ifname, "gwtap-src1") &&
		   nic.mac_set && nic.mac[0] == 2 && nic.mac[1] == 0xab && nic.mac[2] == 0xcd &&
		   nic.mac[5] == 1, "tap and mac: %s", why);
	TEST_CHECK(virtio_net_parse_nic("mac=02:00:00:00:00:02,tap=t", &nic, why, sizeof(why)) == 0 &&
		   nic.mac[5] == 2, "either order");
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		TEST_CHECK(virtio_net_parse_nic(bad[i], &nic, why, sizeof(why)) == -EINVAL && why[0],
			   "\"%s\" accepted", bad[i]);
	}
}

static size_t encode(struct netdrv *d, uint8_t *buf, size_t cap)
{
	struct virtio_mmio *t = virtio_net_transport(d->net);
	struct gw_wbuf w;

	gw_wbuf_init(&w, buf, cap);
	virtio_mmio_lock(t);
	TEST_ASSERT(virtio_mmio_encode(t, &w) == 0, "encode");
	virtio_mmio_unlock(t);
	return w.len;
}

static int decode(struct netdrv *d, const uint8_t *buf, size_t len, char *why, size_t why_len)
{
	struct virtio_mmio *t = virtio_net_transport(d->net);
	int ret;

	virtio_mmio_lock(t);
	ret = virtio_mmio_decode(t, buf, len, VIRTIO_MMIO_STATE_VERSION, why, why_len);
	virtio_mmio_unlock(t);
	return ret;
}

static void net_part(void)
{
	static const uint8_t src_mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	struct netdrv src, dst;
	uint8_t buf[4096], bad[4096], mac[6];
	char why[256];
	size_t len;

	netdrv_init(&src, "virtio-net0");
	TEST_ASSERT(netdrv_setup(&src, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "negotiation");
	len = encode(&src, buf, sizeof(buf));
	/* The net part closes the section: mac[6], le16 status, le32 reserved. */
	TEST_CHECK(!memcmp(buf + len - 12, src_mac, 6) && gw_le16_get(buf + len - 6) == 1,
		   "net part: the MAC, link up");
	netdrv_init(&dst, "virtio-net0");
	netdrv_copy_guest(&dst, &src);
	memcpy(bad, buf, len);
	bad[len - 6] = 0x3;		/* unknown status bit */
	TEST_CHECK(decode(&dst, bad, len, why, sizeof(why)) == -EINVAL, "status 3 accepted");
	memcpy(bad, buf, len);
	bad[len - 1] = 1;		/* reserved */
	TEST_CHECK(decode(&dst, bad, len, why, sizeof(why)) == -EINVAL, "reserved accepted");
	TEST_CHECK(decode(&dst, buf, len - 1, why, sizeof(why)) == -EINVAL, "truncated accepted");
	TEST_CHECK(netdrv_rd(&dst, VIRTIO_MMIO_STATUS) == 0, "nothing applied");
	/* A good one, from a source with another MAC: the destination takes it. */
	memcpy(bad, buf, len);
	bad[len - 12 + 5] = 0x99;
	TEST_CHECK(decode(&dst, bad, len, why, sizeof(why)) == 0, "good part: %s", why);
	virtio_net_mac(dst.net, mac);
	TEST_CHECK(mac[5] == 0x99, "the source's MAC kept");
	{
		uint32_t lo = netdrv_rd(&dst, VIRTIO_MMIO_CONFIG), hi = netdrv_rd(&dst, VIRTIO_MMIO_CONFIG + 4);

		TEST_CHECK((lo & 0xff) == 0x52 && ((hi >> 8) & 0xff) == 0x99 && (hi >> 16) == 1,
			   "config space: mac and status (%#x %#x)", lo, hi);
	}
	TEST_CHECK(netdrv_rd(&dst, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_DRIVER_OK, "status applied");
	netdrv_fini(&src);
	netdrv_fini(&dst);
}

int main(void)
{
	parse();
	net_part();
	TEST_EXIT();
}
