/* SPDX-License-Identifier: MIT */
/*
 * Invariants of the transport's state section (virtio_state.c):
 *  - round trip: a device mid-run (features, status, both queues, indices,
 *    a pending interrupt, its config) encoded and decoded into a fresh
 *    device over a copy of the RAM re-encodes to the same bytes, drives
 *    the interrupt line as the source had it, and carries on: the next
 *    request is answered at the next used index. A driver's state before
 *    FEATURES_OK (features not offered, any QueueNum) migrates as written.
 *  - every hostile field is refused with a reason and nothing is applied:
 *    foreign device id, unknown status bits, DRIVER_OK without FEATURES_OK,
 *    features not offered, FEATURES_OK without VERSION_1, unknown interrupt
 *    bits, queue count, reserved bits, queue flags, sizes, unaligned or
 *    outside rings, a ready queue before FEATURES_OK, more in flight than
 *    the queue holds, a device part of the wrong length, trailing bytes,
 *    another version, and every truncation.
 */
#include <stdlib.h>
#include "drv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define F_V1 VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define F_EVENT VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX)
#define BUF(n) (DRV_RAM_GPA + 0x4000 + 0x1000ull * (n))
#define CAP 4096
#define Q0 40u			/* first queue record */
#define QB 36u			/* bytes per queue record */

static size_t encode(struct drv *d, uint8_t *out)
{
	struct gw_wbuf w;

	gw_wbuf_init(&w, out, CAP);
	TEST_ASSERT(virtio_mmio_encode(&d->t, &w) == 0, "encode");
	return w.len;
}

static void request(struct drv *d, uint16_t head)
{
	drv_desc(d, d->desc_gpa, head, BUF(0), 8, VIRTQ_DESC_F_NEXT, head + 1);
	drv_desc(d, d->desc_gpa, head + 1, BUF(1), 8, VIRTQ_DESC_F_WRITE, 0);
	drv_offer(d, head);
	drv_kick(d, 0);
}

/* A source mid-run: 3 requests answered, the interrupt not acked, config changed. */
static void source(struct drv *s)
{
	drv_init(s, &test_dev_ops);
	drv_start(s, F_V1 | F_EVENT, 8);
	drv_queue(s, 1, 16, DRV_RAM_GPA + 0x8000, DRV_RAM_GPA + 0x9000, DRV_RAM_GPA + 0xa000);
	drv_wr(s, VIRTIO_MMIO_QUEUE_SEL, 0);
	for (uint16_t i = 0; i < 3; i++)
		request(s, (uint16_t)(2 * i));
	memcpy(s->dev.config, "godwit-config-16", 16);
	TEST_ASSERT(s->irq_level && s->t.vq[0].used_idx == 3, "source set up");
}

static void round_trip(void)
{
	static uint8_t a[CAP], b[CAP];
	struct drv s, d;
	size_t an, bn;
	char why[256];
	uint32_t id, len;

	source(&s);
	an = encode(&s, a);
	TEST_CHECK(an == Q0 + 2 * QB + 4 + 20, "section of %zu bytes", an);
	drv_init(&d, &test_dev_ops);
	memcpy(d.ram, s.ram, DRV_RAM_BYTES);
	TEST_CHECK(virtio_mmio_decode(&d.t, a, an, VIRTIO_MMIO_STATE_VERSION, why, sizeof(why)) == 0,
		   "decode: %s", why);
	bn = encode(&d, b);
	TEST_CHECK(an == bn && !memcmp(a, b, an), "re-encodes to the same bytes");
	TEST_CHECK(d.irq_level && drv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) == VIRTIO_MMIO_INT_VRING,
		   "pending interrupt carried");
	TEST_CHECK(!memcmp(d.dev.config, "godwit-config-16", 16) && d.dev.chains == 3,
		   "device part carried");
	/* The destination's driver carries on where the source's stopped. */
	d.num = 8;
	d.desc_gpa = s.desc_gpa;
	d.avail_gpa = s.avail_gpa;
	d.used_gpa = s.used_gpa;
	d.avail_idx = s.avail_idx;
	request(&d, 6);
	drv_used_elem(&d, 3, &id, &len);
	TEST_CHECK(!drv_needs_reset(&d) && drv_used_idx(&d) == 4 && id == 6 && len == 8,
		   "next request answered at used 3 (used %u id %u len %u)", drv_used_idx(&d), id, len);
	drv_fini(&s);
	drv_fini(&d);
}

/* What a live driver may leave before FEATURES_OK (any features, any QueueNum) migrates. */
static void before_features_ok(void)
{
	static uint8_t a[CAP];
	struct drv s, d;
	char why[256];
	size_t an;

	drv_init(&s, &test_dev_ops);
	drv_wr(&s, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	drv_wr(&s, VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffff);
	drv_wr(&s, VIRTIO_MMIO_QUEUE_SEL, 1);
	drv_wr(&s, VIRTIO_MMIO_QUEUE_NUM, 1000);
	an = encode(&s, a);
	drv_init(&d, &test_dev_ops);
	TEST_CHECK(virtio_mmio_decode(&d.t, a, an, VIRTIO_MMIO_STATE_VERSION, why, sizeof(why)) == 0,
		   "state before FEATURES_OK: %s", why);
	TEST_CHECK(d.t.driver_features == 0xffffffff && d.t.vq[1].num == 1000, "carried as written");
	drv_fini(&s);
	drv_fini(&d);
}

struct mutation {
	const char *name;
	unsigned off, width;		/* field to overwrite */
	uint64_t value;
};

static const struct mutation mutations[] = {
	{ "device id", 0, 4, 1 },
	{ "unknown status bit", 4, 4, 0x2f },
	{ "DRIVER_OK without FEATURES_OK", 4, 4, 0x07 },
	{ "features not offered", 8, 8, F_V1 | VIRTIO_FEATURE(7) },
	{ "FEATURES_OK without VERSION_1", 8, 8, F_EVENT },
	{ "unknown interrupt bit", 28, 4, 5 },
	{ "queue count", 36, 2, 3 },
	{ "reserved", 38, 2, 1 },
	{ "queue flags", Q0 + 34, 2, 5 },
	{ "queue size not a power of 2", Q0, 4, 6 },
	{ "queue size above the maximum", Q0, 4, 512 },
	{ "descriptor table unaligned", Q0 + 4, 8, DRV_RAM_GPA + 4 },
	{ "descriptor table outside RAM", Q0 + 4, 8, 0x40000000 },
	{ "used ring outside RAM", Q0 + 20, 8, DRV_RAM_GPA + DRV_RAM_BYTES - 8 },
	{ "in flight beyond the queue size", Q0 + 28, 2, 3 + 9 },
	{ "device part length", Q0 + 2 * QB, 4, 19 },
	{ "device part length huge", Q0 + 2 * QB, 4, 0xffffffff },
};

/* @buf refused; the destination unchanged (same encoding as before). */
static void refused(struct drv *d, const char *name, const uint8_t *buf, size_t n,
		    uint32_t version, const uint8_t *before, size_t before_n)
{
	static uint8_t after[CAP];
	char why[256] = "";
	int ret = virtio_mmio_decode(&d->t, buf, n, version, why, sizeof(why));

	TEST_CHECK(ret < 0 && why[0], "%s: accepted", name);
	TEST_CHECK(encode(d, after) == before_n && !memcmp(after, before, before_n),
		   "%s: something was applied", name);
	if (getenv("DRV_VERBOSE"))
		fprintf(stderr, "%s: %s\n", name, why);
}

static void hostile(void)
{
	static uint8_t a[CAP], m[CAP], before[CAP];
	struct drv s, d;
	size_t an, bn;

	source(&s);
	an = encode(&s, a);
	drv_init(&d, &test_dev_ops);
	bn = encode(&d, before);
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
		const struct mutation *mu = &mutations[i];

		memcpy(m, a, an);
		for (unsigned k = 0; k < mu->width; k++)
			m[mu->off + k] = (uint8_t)(mu->value >> (8 * k));
		refused(&d, mu->name, m, an, VIRTIO_MMIO_STATE_VERSION, before, bn);
	}
	/* A ready queue while the status has no FEATURES_OK (but is otherwise fine). */
	memcpy(m, a, an);
	gw_le32_put(m + 4, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	refused(&d, "ready queue before FEATURES_OK", m, an, VIRTIO_MMIO_STATE_VERSION, before, bn);
	memcpy(m, a, an);
	m[an] = 0;
	refused(&d, "trailing byte", m, an + 1, VIRTIO_MMIO_STATE_VERSION, before, bn);
	refused(&d, "version 2", a, an, 2, before, bn);
	for (size_t n = 0; n < an; n++)
		refused(&d, "truncated", a, n, VIRTIO_MMIO_STATE_VERSION, before, bn);
	drv_fini(&s);
	drv_fini(&d);
}

int main(void)
{
	drv_count_log();
	round_trip();
	before_features_ok();
	hostile();
	TEST_EXIT();
}
