/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the guest's driver (common/vnet_drv.c) refuses what is not a
 * virtio-net it can drive, treats the device as hostile (a used entry with
 * a bad id or length, or a used index ahead of what was offered, stops it
 * for good with VNET_EPROTO, and it never reads or writes outside its
 * area), drops frames shorter than an Ethernet header, changes only the 12
 * MAC bytes of what it forwards, and binds again to its area after a
 * "migration" (attach) with every index where it was.
 *
 * The device here is the test itself: a register page in a struct (what
 * setup reads and writes), and used entries written straight into the
 * area, as a device would. The area sits between PROT_NONE guard pages.
 */
#include <string.h>
#include <sys/mman.h>
#include "dev/virtio_regs.h"
#include "test_util.h"
#include "vnet_drv.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096u
#define AREA_GPA 0x40000000ull

struct fake_dev {
	uint32_t magic, version, device_id, num_max, status, features_hi;
	uint32_t feat_sel, notifies, acks;
	uint64_t drv_features;
	uint32_t int_status;
};

static uint32_t fake_rd(void *ctx, uint32_t off)
{
	struct fake_dev *f = ctx;

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE: return f->magic;
	case VIRTIO_MMIO_VERSION: return f->version;
	case VIRTIO_MMIO_DEVICE_ID: return f->device_id;
	case VIRTIO_MMIO_DEVICE_FEATURES: return f->feat_sel ? f->features_hi : 1u << 5;
	case VIRTIO_MMIO_QUEUE_NUM_MAX: return f->num_max;
	case VIRTIO_MMIO_STATUS: return f->status;
	case VIRTIO_MMIO_INTERRUPT_STATUS: return f->int_status;
	case VIRTIO_MMIO_CONFIG: return 0x00545452u;	/* 52:54:54:00 ... */
	case VIRTIO_MMIO_CONFIG + 4: return 0x0201u;
	default: return 0;
	}
}

static void fake_wr(void *ctx, uint32_t off, uint32_t v)
{
	struct fake_dev *f = ctx;

	if (off == VIRTIO_MMIO_DEVICE_FEATURES_SEL)
		f->feat_sel = v;
	else if (off == VIRTIO_MMIO_STATUS)
		f->status = v;
	else if (off == VIRTIO_MMIO_QUEUE_NOTIFY)
		f->notifies++;
	else if (off == VIRTIO_MMIO_INTERRUPT_ACK)
		f->acks++, f->int_status &= ~v;
}

static struct fake_dev good_dev(void)
{
	return (struct fake_dev){ .magic = VIRTIO_MMIO_MAGIC, .version = 2, .device_id = 1,
				  .num_max = 256, .features_hi = 1 };
}

static uint8_t *area_map(void)
{
	uint8_t *m = mmap(NULL, VNET_DRV_AREA_BYTES + 2 * PAGE, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	TEST_ASSERT(m != MAP_FAILED, "mmap");
	TEST_ASSERT(mprotect(m + PAGE, VNET_DRV_AREA_BYTES, PROT_READ | PROT_WRITE) == 0, "mprotect");
	return m + PAGE;
}

/* The device uses receive buffer @id with @len bytes (header included). */
static void dev_rx_used(uint8_t *area, uint16_t *used_idx, uint32_t id, uint32_t len)
{
	uint8_t *used = area + VNET_DRV_RXQ_OFF + VNET_DRV_USED_OFF;

	memcpy(used + 4 + 8u * (*used_idx % VNET_DRV_QUEUE_NUM), &id, 4);
	memcpy(used + 8 + 8u * (*used_idx % VNET_DRV_QUEUE_NUM), &len, 4);
	(*used_idx)++;
	memcpy(used + 2, used_idx, 2);
}

static void setup_refusals(uint8_t *area)
{
	struct fake_dev f = good_dev();
	struct vnet_io io = { fake_rd, fake_wr, &f };
	struct vnet_drv d;

	f.magic = 0;
	TEST_CHECK(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == VNET_ENODEV, "no magic");
	f = good_dev();
	f.device_id = 2;
	TEST_CHECK(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == VNET_ENODEV, "a block device");
	f = good_dev();
	f.features_hi = 0;
	TEST_CHECK(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == VNET_EFEAT, "no VERSION_1");
	TEST_CHECK(f.status & VIRTIO_STATUS_FAILED, "FAILED not set: %#x", f.status);
	f = good_dev();
	f.num_max = 16;
	TEST_CHECK(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == VNET_EQUEUE, "a small queue");
	f = good_dev();
	TEST_CHECK(vnet_drv_setup(&d, &io, AREA_GPA + 8, area, 0) == VNET_EINVAL, "unaligned");
	memset(area, 0, PAGE);
	TEST_CHECK(vnet_drv_attach(&d, &io, AREA_GPA, area) == VNET_ENODEV, "attach to nothing");
}

/* A frame forwarded back out of one NIC: MACs swapped, the rest intact; then attach. */
static void forward_one(uint8_t *area)
{
	struct fake_dev f = good_dev();
	struct vnet_io io = { fake_rd, fake_wr, &f };
	struct vnet_drv d, again;
	uint16_t used = 0;
	uint8_t *rx0 = area + VNET_DRV_RXBUF_OFF + 5 * VNET_DRV_BUF_BYTES, *tx;
	uint8_t want[100];

	TEST_ASSERT(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == 0, "setup");
	TEST_CHECK(f.status == (VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
				VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK), "status %#x", f.status);
	TEST_CHECK(d.st->mac[0] == 0x52 && d.st->mac[5] == 0x02, "MAC from the config space");
	TEST_CHECK(f.notifies == 1, "%u notifications after posting the receive buffers", f.notifies);
	for (unsigned i = 0; i < sizeof(want); i++)
		rx0[VNET_DRV_HDR_BYTES + i] = want[i] = (uint8_t)(i * 7 + 1);
	memcpy(want, rx0 + VNET_DRV_HDR_BYTES + 6, 6);
	memcpy(want + 6, rx0 + VNET_DRV_HDR_BYTES, 6);
	dev_rx_used(area, &used, 5, VNET_DRV_HDR_BYTES + sizeof(want));
	dev_rx_used(area, &used, 6, VNET_DRV_HDR_BYTES + 5);	/* too short: dropped */
	TEST_CHECK(vnet_fwd_pass(&d, 1, NULL, 32) == 1, "one frame forwarded");
	TEST_CHECK(d.st->rx_dropped == 1 && d.st->tx_frames == 1, "dropped %llu sent %llu",
		   (unsigned long long)d.st->rx_dropped, (unsigned long long)d.st->tx_frames);
	tx = area + VNET_DRV_TXBUF_OFF;
	TEST_CHECK(memcmp(tx + VNET_DRV_HDR_BYTES, want, sizeof(want)) == 0, "frame changed beyond its MACs");
	TEST_CHECK(*(uint32_t *)(area + VNET_DRV_TXQ_OFF + 8) == VNET_DRV_HDR_BYTES + sizeof(want),
		   "transmit descriptor length");
	TEST_ASSERT(vnet_drv_attach(&again, &io, AREA_GPA, area) == 0, "attach");
	TEST_CHECK(again.st->q[0].used_seen == 2 && again.st->q[1].avail_idx == 1,
		   "indices after attach: rx used %u, tx avail %u", again.st->q[0].used_seen,
		   again.st->q[1].avail_idx);
	f.int_status = VIRTIO_MMIO_INT_VRING;
	TEST_CHECK(vnet_drv_irq_ack(&again) == VIRTIO_MMIO_INT_VRING && !f.int_status, "ack");
}

/* Each hostile used entry stops the driver for good. */
static void hostile(uint8_t *area)
{
	static const struct { uint32_t id, len; uint16_t jump; const char *what; } cases[] = {
		{ VNET_DRV_QUEUE_NUM, 64, 1, "id past the queue" },
		{ 0xffffffffu, 64, 1, "id all ones" },
		{ 3, VNET_DRV_BUF_BYTES + 1, 1, "longer than the buffer" },
		{ 3, VNET_DRV_HDR_BYTES - 1, 1, "shorter than the header" },
		{ 3, 64, VNET_DRV_QUEUE_NUM + 1, "more used than offered" },
	};
	uint8_t frame[64] = { 0 };

	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fake_dev f = good_dev();
		struct vnet_io io = { fake_rd, fake_wr, &f };
		struct vnet_drv d;
		struct vnet_frame fr;
		uint16_t used = (uint16_t)(cases[c].jump - 1);

		TEST_ASSERT(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == 0, "setup");
		dev_rx_used(area, &used, cases[c].id, cases[c].len);
		TEST_CHECK(vnet_drv_rx_peek(&d, &fr) == VNET_EPROTO, "%s: not refused", cases[c].what);
		TEST_CHECK(vnet_drv_tx(&d, frame, sizeof(frame)) == VNET_EPROTO &&
			   vnet_fwd_pass(&d, 1, NULL, 8) == VNET_EPROTO, "%s: not sticky", cases[c].what);
	}
	{	/* the transmit side: a used index ahead of what was sent */
		struct fake_dev f = good_dev();
		struct vnet_io io = { fake_rd, fake_wr, &f };
		struct vnet_drv d;
		uint16_t bad = 2;

		TEST_ASSERT(vnet_drv_setup(&d, &io, AREA_GPA, area, 0) == 0, "setup");
		TEST_CHECK(vnet_drv_tx(&d, frame, sizeof(frame)) == 0, "tx");
		memcpy(area + VNET_DRV_TXQ_OFF + VNET_DRV_USED_OFF + 2, &bad, 2);
		vnet_drv_tx_reclaim(&d);
		TEST_CHECK(vnet_drv_err(&d) == VNET_EPROTO, "tx used ahead of avail: %d", vnet_drv_err(&d));
		TEST_CHECK(vnet_drv_tx(&d, frame, 13) == VNET_EPROTO, "sticky");
	}
}

int main(void)
{
	uint8_t *area = area_map();

	setup_refusals(area);
	forward_one(area);
	hostile(area);
	munmap(area - PAGE, VNET_DRV_AREA_BYTES + 2 * PAGE);
	TEST_EXIT();
}
