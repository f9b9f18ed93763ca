/* SPDX-License-Identifier: MIT */
/*
 * Invariants of notification suppression (virtio 1.2, 2.7.7 and 2.7.10):
 *  - EVENT_IDX: the device interrupts only when the used index passes the
 *    driver's used_event (the first decision after enable always does); a
 *    batch of pushes makes one decision; after a drain the device's
 *    avail_event names the next entry it will take, and used->flags is
 *    never written.
 *  - nothing used since the last decision: no interrupt, whatever the mode.
 *  - without EVENT_IDX: VRING_AVAIL_F_NO_INTERRUPT silences the device,
 *    and the device's VIRTQ_USED_F_NO_NOTIFY is set while it drains and
 *    cleared after; re-enabling reports buffers that came meanwhile.
 */
#include "drv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define F_V1 VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define F_EVENT VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX)
#define BUF(n) (DRV_RAM_GPA + 0x4000 + 0x1000ull * (n))
#define NUM 8u

static void set_used_event(struct drv *d, uint16_t v)
{
	gw_le16_put(drv_host(d, d->avail_gpa + 4 + 2 * NUM), v);
}

static uint16_t avail_event(struct drv *d)
{
	return gw_le16_get(drv_host(d, d->used_gpa + 4 + 8 * NUM));
}

/* One single-descriptor request, kicked; the interrupt acked after. Returns: interrupted? */
static bool request(struct drv *d)
{
	unsigned before = d->irq_raises;
	uint16_t head = (uint16_t)(d->avail_idx % NUM);

	drv_desc(d, d->desc_gpa, head, BUF(head), 4, VIRTQ_DESC_F_WRITE, 0);
	drv_offer(d, head);
	drv_kick(d, 0);
	drv_wr(d, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	return d->irq_raises != before;
}

static void event_idx(void)
{
	struct drv d;
	bool irq[5];

	drv_init(&d, &test_dev_ops);
	drv_start(&d, F_V1 | F_EVENT, NUM);
	set_used_event(&d, 3);			/* "interrupt me once entry 3 is used" */
	for (unsigned i = 0; i < 5; i++)
		irq[i] = request(&d);
	TEST_CHECK(irq[0], "the first decision interrupts");
	TEST_CHECK(!irq[1] && !irq[2], "used 2 and 3 do not pass used_event 3");
	TEST_CHECK(irq[3], "used 4 passes it");
	TEST_CHECK(!irq[4], "used 5: used_event not moved, silent");
	TEST_CHECK(avail_event(&d) == 5, "avail_event %u names the next entry", avail_event(&d));
	TEST_CHECK(gw_le16_get(drv_host(&d, d.used_gpa)) == 0, "used->flags untouched");
	/* A batch: three requests, one kick, one interrupt. */
	set_used_event(&d, 5);
	for (unsigned i = 0; i < 3; i++) {
		uint16_t head = (uint16_t)(d.avail_idx % NUM);

		drv_desc(&d, d.desc_gpa, head, BUF(head), 4, VIRTQ_DESC_F_WRITE, 0);
		drv_offer(&d, head);
	}
	{
		unsigned before = d.irq_raises;

		drv_kick(&d, 0);
		TEST_CHECK(drv_used_idx(&d) == 8 && d.irq_raises == before + 1,
			   "batch: used %u, %u interrupts", drv_used_idx(&d), d.irq_raises - before);
	}
	drv_fini(&d);
}

static void no_interrupt_flag(void)
{
	struct drv d;
	struct virtq *vq;

	drv_init(&d, &test_dev_plain_ops);
	drv_start(&d, F_V1, NUM);
	gw_le16_put(drv_host(&d, d.avail_gpa), VIRTQ_AVAIL_F_NO_INTERRUPT);
	TEST_CHECK(!request(&d) && !request(&d), "NO_INTERRUPT: silent");
	gw_le16_put(drv_host(&d, d.avail_gpa), 0);
	TEST_CHECK(request(&d), "flag cleared: interrupts");
	{
		unsigned before = d.irq_raises;

		drv_kick(&d, 0);		/* nothing new offered */
		TEST_CHECK(d.irq_raises == before, "a kick with nothing used: no interrupt");
	}
	TEST_CHECK(gw_le16_get(drv_host(&d, d.used_gpa)) == 0, "NO_NOTIFY cleared after a drain");
	/* The device side, directly (the transport's lock: this is the only thread). */
	vq = &d.t.vq[0];
	virtq_set_notify(vq, false);
	TEST_CHECK(gw_le16_get(drv_host(&d, d.used_gpa)) == VIRTQ_USED_F_NO_NOTIFY, "NO_NOTIFY set");
	TEST_CHECK(!virtq_set_notify(vq, true), "nothing came meanwhile");
	drv_desc(&d, d.desc_gpa, 0, BUF(0), 4, VIRTQ_DESC_F_WRITE, 0);
	drv_offer(&d, 0);			/* no kick: a guest that saw NO_NOTIFY */
	TEST_CHECK(virtq_set_notify(vq, true), "re-enabling sees the new buffer");
	TEST_CHECK(virtq_pending(vq) == 1, "one pending");
	drv_fini(&d);
}

int main(void)
{
	drv_count_log();
	event_idx();
	no_interrupt_flag();
	TEST_CHECK(drv_needs_reset_lines == 0, "needs_reset logged");
	TEST_EXIT();
}
