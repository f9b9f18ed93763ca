/* SPDX-License-Identifier: MIT */
/*
 * Invariants of the split virtqueue walk, with a driver-side ring written
 * by the test into fake guest RAM:
 *  - a chain of readable then writable descriptors reaches the device in
 *    order (it reads exactly the readable bytes), the device's reply lands
 *    in the writable buffers in order, and the used entry names the head
 *    and the bytes written.
 *  - every byte the device wrote is reported dirty (buffers, used entry,
 *    used index) and nothing else is: the fake RAM is compared with a copy.
 *  - an indirect table is walked like a chain, in its next order; a full
 *    ring offered at once is answered at once.
 *  - indices wrap at 2^16 (70000 requests through an 8-entry ring).
 *  - a used buffer raises the line (InterruptStatus bit 0) and the ack
 *    lowers it.
 *  - guest RAM ranges: overlapping, wrapping or differently aligned ranges
 *    are refused; a span is mapped only inside one range (not across two
 *    contiguous ones), never with length 0 or a wrapping length.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include "drv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define F_V1 VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define F_INDIRECT VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC)
#define BUF(n) (DRV_RAM_GPA + 0x4000 + 0x1000ull * (n))

/* Bytes that differ between RAM and @copy but are not reported dirty. */
static unsigned unreported(struct drv *d, const uint8_t *copy)
{
	unsigned n = 0;

	for (unsigned i = 0; i < DRV_RAM_BYTES; i++)
		n += copy[i] != d->ram[i] && !d->dirty[i];
	return n;
}

static unsigned dirty_bytes(struct drv *d)
{
	unsigned n = 0;

	for (unsigned i = 0; i < DRV_RAM_BYTES; i++)
		n += d->dirty[i];
	return n;
}

static void fill(struct drv *d, uint64_t gpa, uint32_t len, uint8_t v)
{
	memset(drv_host(d, gpa), v, len);
}

static void one_chain(void)
{
	struct drv d;
	uint8_t *copy = malloc(DRV_RAM_BYTES);
	uint32_t id, len;
	const uint8_t *in1, *in2;

	drv_init(&d, &test_dev_ops);
	drv_start(&d, F_V1, 8);
	fill(&d, BUF(0), 100, 2);
	drv_desc(&d, d.desc_gpa, 0, BUF(0), 100, VIRTQ_DESC_F_NEXT, 1);
	drv_desc(&d, d.desc_gpa, 1, BUF(1), 60, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2);
	drv_desc(&d, d.desc_gpa, 2, BUF(2), 60, VIRTQ_DESC_F_WRITE, 0);
	drv_offer(&d, 0);
	memcpy(copy, d.ram, DRV_RAM_BYTES);
	drv_dirty_clear(&d);
	drv_kick(&d, 0);
	TEST_CHECK(!drv_needs_reset(&d), "healthy");
	TEST_CHECK(drv_used_idx(&d) == 1, "used idx %u", drv_used_idx(&d));
	drv_used_elem(&d, 0, &id, &len);
	TEST_CHECK(id == 0 && len == 100, "used id %u len %u", id, len);
	TEST_CHECK(d.dev.out_sum == 200, "device read the 100 readable bytes (sum %" PRIu64 ")",
		   d.dev.out_sum);
	in1 = drv_host(&d, BUF(1));
	in2 = drv_host(&d, BUF(2));
	TEST_CHECK(in1[0] == 0xa5 && in1[59] == 0xa5 && in2[39] == 0xa5 && in2[40] == 0,
		   "reply in order over both writable buffers");
	TEST_CHECK(drv_dirty(&d, BUF(1), 60) && drv_dirty(&d, BUF(2), 40), "buffers reported");
	TEST_CHECK(drv_dirty(&d, d.used_gpa + 2, 2 + 8), "used idx and entry reported");
	TEST_CHECK(unreported(&d, copy) == 0, "%u bytes written but not reported",
		   unreported(&d, copy));
	/* Disabling notifications (no EVENT_IDX) wrote used->flags: 2 more bytes. */
	TEST_CHECK(dirty_bytes(&d) == 100 + 10 + 2, "%u bytes reported, 112 expected",
		   dirty_bytes(&d));
	TEST_CHECK(d.irq_level && d.irq_raises == 1 &&
		   drv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) == VIRTIO_MMIO_INT_VRING, "interrupt");
	drv_wr(&d, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	TEST_CHECK(!d.irq_level, "acked");
	TEST_CHECK(d.dirty_outside == 0, "no report outside RAM");
	drv_fini(&d);
	free(copy);
}

static void indirect(void)
{
	struct drv d;
	uint64_t table = BUF(8);
	uint32_t id, len;

	drv_init(&d, &test_dev_ops);
	drv_start(&d, F_V1 | F_INDIRECT, 8);
	drv_desc(&d, table, 0, BUF(0), 16, VIRTQ_DESC_F_NEXT, 2);	/* in table order 0, 2, 1 */
	drv_desc(&d, table, 2, BUF(0) + 16, 8, VIRTQ_DESC_F_NEXT, 1);
	drv_desc(&d, table, 1, BUF(1), 32, VIRTQ_DESC_F_WRITE, 0);
	drv_desc(&d, d.desc_gpa, 5, table, 3 * 16, VIRTQ_DESC_F_INDIRECT, 0);
	drv_offer(&d, 5);
	drv_kick(&d, 0);
	drv_used_elem(&d, 0, &id, &len);
	TEST_CHECK(!drv_needs_reset(&d) && drv_used_idx(&d) == 1 && id == 5 && len == 24,
		   "indirect chain answered (id %u len %u)", id, len);
	TEST_CHECK(d.dev.elem.nr_out == 2 && d.dev.elem.nr_in == 1 &&
		   d.dev.elem.gpa[1] == BUF(0) + 16, "walked in the table's next order");
	drv_fini(&d);
}

static void full_ring(void)
{
	struct drv d;

	drv_init(&d, &test_dev_ops);
	drv_start(&d, F_V1, 8);
	for (uint16_t i = 0; i < 8; i++) {
		drv_desc(&d, d.desc_gpa, i, BUF(i), 8, VIRTQ_DESC_F_WRITE, 0);
		drv_offer(&d, i);
	}
	drv_kick(&d, 0);
	TEST_CHECK(drv_used_idx(&d) == 8 && d.dev.chains == 8 && !drv_needs_reset(&d),
		   "8 chains at once (used %u)", drv_used_idx(&d));
	for (uint16_t i = 0; i < 8; i++) {
		uint32_t id, len;

		drv_used_elem(&d, i, &id, &len);
		TEST_CHECK(id == i && len == 0, "entry %u: id %u len %u", i, id, len);
	}
	drv_fini(&d);
}

static void wrap(void)
{
	struct drv d;
	unsigned bad = 0;

	drv_init(&d, &test_dev_ops);
	drv_start(&d, F_V1, 8);
	d.dev.reply_all = true;
	for (unsigned n = 0; n < 70000; n++) {
		uint16_t head = (uint16_t)(2 * (n % 4));
		uint32_t id, len;

		drv_desc(&d, d.desc_gpa, head, BUF(0), 4, VIRTQ_DESC_F_NEXT, head + 1);
		drv_desc(&d, d.desc_gpa, head + 1, BUF(1), 4, VIRTQ_DESC_F_WRITE, 0);
		drv_offer(&d, head);
		drv_kick(&d, 0);
		drv_used_elem(&d, (uint16_t)n, &id, &len);
		bad += drv_used_idx(&d) != (uint16_t)(n + 1) || id != head || len != 4;
		drv_wr(&d, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	}
	TEST_CHECK(bad == 0 && !drv_needs_reset(&d), "%u of 70000 requests wrong across the wrap",
		   bad);
	TEST_CHECK(d.t.vq[0].last_avail_idx == (uint16_t)70000 && d.irq_raises == 70000,
		   "indices wrapped (last_avail %u, interrupts %u)", d.t.vq[0].last_avail_idx,
		   d.irq_raises);
	drv_fini(&d);
}

static void ram_ranges(void)
{
	static uint8_t a[0x1000] __attribute__((aligned(4096)));
	static uint8_t b[0x1000] __attribute__((aligned(4096)));
	struct virtq_mem m = { .nr = 0 };

	TEST_CHECK(virtq_mem_add(&m, 0x1000, a, sizeof(a)) == 0, "range a");
	TEST_CHECK(virtq_mem_add(&m, 0x2000, b, sizeof(b)) == 0, "range b, contiguous");
	TEST_CHECK(virtq_mem_add(&m, 0x2800, a, 0x1000) == -EINVAL, "overlap refused");
	TEST_CHECK(virtq_mem_add(&m, 0x8000, a + 8, 0x100) == -EINVAL,
		   "gpa and host differently aligned refused");
	TEST_CHECK(virtq_mem_add(&m, ~0ull - 0xff, a, 0x1000) == -EINVAL, "wrapping range refused");
	TEST_CHECK(virtq_mem_map(&m, 0x1000, 0x1000) == a, "all of a");
	TEST_CHECK(virtq_mem_map(&m, 0x2fff, 1) == b + 0xfff, "last byte of b");
	TEST_CHECK(!virtq_mem_map(&m, 0x1800, 0x1000), "a span over two ranges refused");
	TEST_CHECK(!virtq_mem_map(&m, 0x2fff, 2), "past the end refused");
	TEST_CHECK(!virtq_mem_map(&m, 0xfff, 2), "before the start refused");
	TEST_CHECK(!virtq_mem_map(&m, 0x1000, 0), "length 0 refused");
	TEST_CHECK(!virtq_mem_map(&m, 0x1010, ~0ull - 8), "wrapping length refused");
}

int main(void)
{
	drv_count_log();
	ram_ranges();
	one_chain();
	indirect();
	full_ring();
	wrap();
	TEST_CHECK(drv_needs_reset_lines == 0, "needs_reset logged %u times", drv_needs_reset_lines);
	TEST_EXIT();
}
