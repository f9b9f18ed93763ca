/* SPDX-License-Identifier: MIT */
/*
 * Invariants of the virtio-mmio register block and its status machine:
 *  - identification: magic "virt", version 2, device and vendor id; the
 *    offered features are the device's plus VIRTIO_F_VERSION_1, in two pages.
 *  - FEATURES_OK stays clear unless the driver took VERSION_1 and only
 *    offered bits; DRIVER_OK stays clear without FEATURES_OK; features are
 *    frozen after FEATURES_OK; a driver cannot clear a status bit or set
 *    NEEDS_RESET; writing 0 resets device, queues and interrupts.
 *  - queues: QueueNumMax is 0 beyond the device's queues; queue registers
 *    are ignored while the queue is ready; QueueReady before FEATURES_OK
 *    does nothing.
 *  - accesses below 0x100 that are not aligned 32-bit are dropped (reads 0),
 *    the configuration space goes to the device within its size only, a
 *    config change bumps the generation and interrupts after DRIVER_OK.
 *  - the MMIO bus: unclaimed reads are all ones, overlapping regions refused.
 */
#include "drv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define F_V1 VIRTIO_FEATURE(VIRTIO_F_VERSION_1)

static void identification(void)
{
	struct drv d;

	drv_init(&d, &test_dev_ops);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_MAGIC_VALUE) == 0x74726976, "magic");
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_VERSION) == 2, "version");
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_DEVICE_ID) == TEST_DEV_ID, "device id");
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_VENDOR_ID) == VIRTIO_MMIO_VENDOR_GODWIT, "vendor");
	drv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES) == (uint32_t)test_dev_ops.features,
		   "features page 0 %#x", drv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES));
	drv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES) == 1, "page 1: VERSION_1 only");
	drv_wr(&d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_DEVICE_FEATURES) == 0, "page 2 empty");
	drv_wr(&d, VIRTIO_MMIO_QUEUE_SEL, 1);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_QUEUE_NUM_MAX) == 256, "queue 1 exists");
	drv_wr(&d, VIRTIO_MMIO_QUEUE_SEL, 2);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_QUEUE_NUM_MAX) == 0, "queue 2 does not");
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_SHM_LEN_LOW) == 0xffffffffu, "no shared memory");
	drv_fini(&d);
}

static void negotiation(void)
{
	const uint32_t ad = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;
	struct drv d;
	uint32_t st;
	unsigned resets;

	drv_init(&d, &test_dev_ops);
	st = drv_negotiate(&d, 0);
	TEST_CHECK(st == ad, "no VERSION_1: FEATURES_OK refused (%#x)", st);
	st = drv_negotiate(&d, F_V1 | VIRTIO_FEATURE(5));
	TEST_CHECK(st == ad, "a bit not offered: refused (%#x)", st);
	st = drv_negotiate(&d, F_V1 | VIRTIO_FEATURE(40));
	TEST_CHECK(st == ad, "a high bit not offered: refused (%#x)", st);
	drv_wr(&d, VIRTIO_MMIO_STATUS, ad | VIRTIO_STATUS_DRIVER_OK);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_STATUS) == ad, "DRIVER_OK without FEATURES_OK refused");
	st = drv_negotiate(&d, F_V1 | VIRTIO_FEATURE(3) | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX));
	TEST_CHECK(st == (ad | VIRTIO_STATUS_FEATURES_OK), "accepted (%#x)", st);
	TEST_CHECK(d.t.driver_features == (F_V1 | VIRTIO_FEATURE(3) |
		   VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX)), "features kept");
	drv_wr(&d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	drv_wr(&d, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffff);
	TEST_CHECK(d.t.driver_features & VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX) &&
		   !(d.t.driver_features & VIRTIO_FEATURE(0)), "frozen after FEATURES_OK");
	drv_wr(&d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_STATUS) == (ad | VIRTIO_STATUS_FEATURES_OK),
		   "a driver cannot clear bits");
	drv_wr(&d, VIRTIO_MMIO_STATUS, ad | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_NEEDS_RESET);
	TEST_CHECK(!drv_needs_reset(&d), "a driver cannot set NEEDS_RESET");
	drv_wr(&d, VIRTIO_MMIO_STATUS, ad | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_DRIVER_OK, "DRIVER_OK");
	resets = d.dev.resets;
	drv_wr(&d, VIRTIO_MMIO_STATUS, 0);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_STATUS) == 0 && d.t.driver_features == 0 &&
		   d.dev.resets == resets + 1, "reset (resets %u)", d.dev.resets);
	drv_fini(&d);
}

static void queue_registers(void)
{
	struct drv d;

	drv_init(&d, &test_dev_ops);
	drv_negotiate(&d, F_V1);
	/* Not ready yet: stored. Ready: later writes ignored. */
	drv_queue(&d, 0, 8, DRV_RAM_GPA, DRV_RAM_GPA + 0x1000, DRV_RAM_GPA + 0x2000);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_QUEUE_READY) == 1, "queue 0 ready");
	drv_wr(&d, VIRTIO_MMIO_QUEUE_NUM, 4);
	drv_wr(&d, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x1234);
	TEST_CHECK(d.t.vq[0].num == 8 && d.t.vq[0].desc_gpa == DRV_RAM_GPA, "ignored while ready");
	drv_wr(&d, VIRTIO_MMIO_QUEUE_READY, 0);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_QUEUE_READY) == 0, "disabled");
	drv_wr(&d, VIRTIO_MMIO_QUEUE_NUM, 4);
	TEST_CHECK(d.t.vq[0].num == 4, "stored once disabled");
	/* Before FEATURES_OK QueueReady does nothing. */
	drv_wr(&d, VIRTIO_MMIO_STATUS, 0);
	drv_wr(&d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	drv_queue(&d, 1, 8, DRV_RAM_GPA, DRV_RAM_GPA + 0x1000, DRV_RAM_GPA + 0x2000);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_QUEUE_READY) == 0 && !drv_needs_reset(&d),
		   "ready before FEATURES_OK ignored");
	drv_fini(&d);
}

static void odd_accesses(void)
{
	struct drv d;
	uint8_t b[8] = { 0 };
	uint32_t gen;

	drv_init(&d, &test_dev_ops);
	memset(b, 0x55, sizeof(b));
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_MAGIC_VALUE, b, 2, false);
	TEST_CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0x55, "16-bit register read: 0, 2 bytes only");
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_MAGIC_VALUE + 1, b, 4, false);
	TEST_CHECK(gw_le32_get(b) == 0, "unaligned register read: 0");
	gw_le32_put(b, VIRTIO_STATUS_ACKNOWLEDGE);
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_STATUS, b, 1, true);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_STATUS) == 0, "8-bit status write dropped");
	TEST_CHECK(drv_rd(&d, 0x0e0) == 0, "unknown register reads 0");
	/* Configuration space: within 16 bytes, any width. */
	memcpy(b, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_CONFIG + 8, b, 8, true);
	TEST_CHECK(!memcmp(d.dev.config + 8, b, 8), "config write");
	memset(b, 0, 8);
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_CONFIG + 9, b, 2, false);
	TEST_CHECK(b[0] == 2 && b[1] == 3, "config read");
	gen = drv_rd(&d, VIRTIO_MMIO_CONFIG_GENERATION);
	TEST_CHECK(gen == 1, "generation %u after one change", gen);
	memset(d.dev.config, 0, sizeof(d.dev.config));
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_CONFIG + 12, b, 8, true);
	TEST_CHECK(d.dev.config[12] == 0 && drv_rd(&d, VIRTIO_MMIO_CONFIG_GENERATION) == gen,
		   "a config write past the end is dropped");
	memset(b, 0x55, 8);
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_CONFIG + 14, b, 4, false);
	TEST_CHECK(gw_le32_get(b) == 0, "a config read past the end reads 0");
	TEST_CHECK(d.irq_raises == 0, "no interrupt before DRIVER_OK");
	drv_start(&d, F_V1, 8);
	vmm_mmio_access(&d.bus, DRV_MMIO_GPA + VIRTIO_MMIO_CONFIG, b, 1, true);
	TEST_CHECK(d.irq_level && drv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) == VIRTIO_MMIO_INT_CONFIG,
		   "config change interrupt after DRIVER_OK");
	drv_wr(&d, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_CONFIG);
	TEST_CHECK(!d.irq_level && drv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) == 0, "acked: line low");
	drv_fini(&d);
}

static void noop(void *opaque, uint64_t off, void *data, uint32_t len, bool is_write)
{
	(void)opaque, (void)off, (void)data, (void)len, (void)is_write;
}

static void bus(void)
{
	struct vmm_mmio_bus b = { .nr = 0 };
	uint8_t data[8];

	TEST_CHECK(vmm_mmio_register(&b, 0x1000, 0x1000, noop, NULL) == 0, "register");
	TEST_CHECK(vmm_mmio_register(&b, 0x1800, 0x1000, noop, NULL) == -EEXIST, "overlap");
	TEST_CHECK(vmm_mmio_register(&b, ~0ull - 10, 0x1000, noop, NULL) == -EINVAL, "wraps");
	TEST_CHECK(vmm_mmio_access(&b, 0x1ffc, data, 4, false), "last word claimed");
	TEST_CHECK(!vmm_mmio_access(&b, 0x1ffe, data, 4, false) && data[0] == 0xff,
		   "straddling the end: unclaimed, all ones");
	TEST_CHECK(!vmm_mmio_access(&b, 0x1000, data, 9, false), "too wide");
}

int main(void)
{
	drv_count_log();
	identification();
	negotiation();
	queue_registers();
	odd_accesses();
	bus();
	TEST_EXIT();
}
