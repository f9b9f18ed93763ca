/* SPDX-License-Identifier: MIT */
/*
 * Invariant: whatever the guest writes into its rings or the queue
 * registers, the device touches nothing outside guest RAM (which lies
 * between PROT_NONE guard pages: a stray access faults and fails the test),
 * does not loop, and a bad value puts it in NEEDS_RESET with one log line,
 * a configuration change interrupt (after DRIVER_OK), no used entry and no
 * more work until the driver resets it; after the reset it works again.
 * One case per rule: descriptor beyond RAM, address + length overflow, zero length,
 * chain loops (ring and indirect), next index >= queue size, head >= queue
 * size, avail idx ahead by more than the queue size, unaligned rings,
 * oversized queue, size not a power of 2, rings outside RAM, queue areas
 * overlapping (the device's used ring over the driver's), a device write
 * into a read-only chain, readable after writable, every indirect misuse,
 * a chain longer than the device maps.
 */
#include "drv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define F_V1 VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define F_INDIRECT VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC)
#define F_EVENT VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX)
#define BUF(n) (DRV_RAM_GPA + 0x4000 + 0x1000ull * (n))
#define RAM_END (DRV_RAM_GPA + DRV_RAM_BYTES)
#define W VIRTQ_DESC_F_WRITE
#define N VIRTQ_DESC_F_NEXT
#define I VIRTQ_DESC_F_INDIRECT

struct hostile {
	const char *name;
	uint64_t features;		/* beside VERSION_1 */
	uint32_t num;			/* queue size (drv_start's layout), 0: case sets it up */
	void (*run)(struct drv *d);	/* offers (and kicks) the bad chain */
};

static void one(struct drv *d, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	drv_desc(d, d->desc_gpa, 0, addr, len, flags, next);
	drv_offer(d, 0);
}

static void beyond_ram(struct drv *d)	{ one(d, RAM_END - 4, 8, W, 0); }
static void far_beyond(struct drv *d)	{ one(d, 0xffff000000000000ull, 64, 0, 0); }
static void below_ram(struct drv *d)	{ one(d, DRV_RAM_GPA - 16, 32, 0, 0); }
static void overflow(struct drv *d)	{ one(d, ~0ull - 4, 16, W, 0); }
static void next_big(struct drv *d)	{ one(d, BUF(0), 16, N, 8); }
static void zero_len(struct drv *d)	{ one(d, BUF(0), 0, W, 0); }

static void loop(struct drv *d)
{
	drv_desc(d, d->desc_gpa, 0, BUF(0), 16, N, 1);
	drv_desc(d, d->desc_gpa, 1, BUF(1), 16, N, 0);
	drv_offer(d, 0);
}

static void self_loop(struct drv *d)	{ one(d, BUF(0), 16, W | N, 0); }

static void head_big(struct drv *d)
{
	drv_desc(d, d->desc_gpa, 0, BUF(0), 16, 0, 0);
	drv_offer(d, 8);
}

static void avail_jump(struct drv *d)
{
	drv_desc(d, d->desc_gpa, 0, BUF(0), 16, 0, 0);
	drv_set_avail_idx(d, 9);
}

static void avail_back(struct drv *d)	{ drv_set_avail_idx(d, 0xffff); }

static void readonly_write(struct drv *d)
{
	d->dev.reply_bytes = 16;		/* the device must answer 16 bytes */
	drv_desc(d, d->desc_gpa, 0, BUF(0), 64, N, 1);
	drv_desc(d, d->desc_gpa, 1, BUF(1), 64, 0, 0);
	drv_offer(d, 0);
}

static void small_write(struct drv *d)
{
	d->dev.reply_bytes = 65;		/* one byte more than the chain can take */
	drv_desc(d, d->desc_gpa, 0, BUF(1), 64, W, 0);
	drv_offer(d, 0);
}

static void read_after_write(struct drv *d)
{
	drv_desc(d, d->desc_gpa, 0, BUF(0), 16, W | N, 1);
	drv_desc(d, d->desc_gpa, 1, BUF(1), 16, 0, 0);
	drv_offer(d, 0);
}

static void indirect_off(struct drv *d)	{ one(d, BUF(8), 32, I, 0); }
static void indirect_next(struct drv *d)	{ one(d, BUF(8), 32, I | N, 1); }
static void indirect_len(struct drv *d)	{ one(d, BUF(8), 24, I, 0); }
static void indirect_zero(struct drv *d)	{ one(d, BUF(8), 0, I, 0); }
static void indirect_outside(struct drv *d)	{ one(d, RAM_END - 16, 32, I, 0); }
static void indirect_long(struct drv *d)	{ one(d, BUF(8), 16 * 9, I, 0); }

static void indirect_nested(struct drv *d)
{
	drv_desc(d, BUF(8), 0, BUF(9), 16, I, 0);
	one(d, BUF(8), 16, I, 0);
}

static void indirect_loop(struct drv *d)
{
	drv_desc(d, BUF(8), 0, BUF(0), 16, N, 1);
	drv_desc(d, BUF(8), 1, BUF(1), 16, N, 0);
	one(d, BUF(8), 32, I, 0);
}

static void indirect_next_big(struct drv *d)
{
	drv_desc(d, BUF(8), 0, BUF(0), 16, N, 2);
	one(d, BUF(8), 32, I, 0);
}

static void indirect_bad_buf(struct drv *d)
{
	drv_desc(d, BUF(8), 0, RAM_END, 1, W, 0);
	one(d, BUF(8), 16, I, 0);
}

static void too_many(struct drv *d)
{
	for (uint16_t i = 0; i < 70; i++)
		drv_desc(d, d->desc_gpa, i, BUF(0), 1, N, i + 1);
	drv_desc(d, d->desc_gpa, 70, BUF(0), 1, 0, 0);
	drv_offer(d, 0);
}

/* Queue configurations, refused at QueueReady. */
static void cfg(struct drv *d, uint32_t num, uint64_t desc, uint64_t avail, uint64_t used)
{
	drv_negotiate(d, F_V1 | F_EVENT);
	drv_queue(d, 0, num, desc, avail, used);
	drv_wr(d, VIRTIO_MMIO_STATUS, drv_rd(d, VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
}

#define A (DRV_RAM_GPA + 0x1000)
#define U (DRV_RAM_GPA + 0x2000)
static void q_desc_unaligned(struct drv *d)	{ cfg(d, 8, DRV_RAM_GPA + 8, A, U); }
static void q_avail_unaligned(struct drv *d)	{ cfg(d, 8, DRV_RAM_GPA, A + 1, U); }
static void q_used_unaligned(struct drv *d)	{ cfg(d, 8, DRV_RAM_GPA, A, U + 2); }
static void q_oversized(struct drv *d)		{ cfg(d, 512, DRV_RAM_GPA, A, U); }
static void q_not_pow2(struct drv *d)		{ cfg(d, 6, DRV_RAM_GPA, A, U); }
static void q_zero(struct drv *d)		{ cfg(d, 0, DRV_RAM_GPA, A, U); }
static void q_desc_outside(struct drv *d)	{ cfg(d, 8, RAM_END - 64, A, U); }
/* With EVENT_IDX the used ring is 2 bytes longer: its avail_event would be past the end. */
static void q_used_event_outside(struct drv *d)	{ cfg(d, 8, DRV_RAM_GPA, A, RAM_END - 68); }
static void q_avail_wraps(struct drv *d)	{ cfg(d, 8, DRV_RAM_GPA, ~0ull - 1, U); }
static void q_used_on_avail(struct drv *d)	{ cfg(d, 8, DRV_RAM_GPA, A, A + 4); }
static void q_desc_on_used(struct drv *d)	{ cfg(d, 8, U, A, U); }
static void q_desc_on_avail(struct drv *d)	{ cfg(d, 8, A - 16, A, U); }

static const struct hostile cases[] = {
	{ "descriptor beyond RAM", 0, 8, beyond_ram },
	{ "descriptor far beyond RAM", 0, 8, far_beyond },
	{ "descriptor starting below RAM", 0, 8, below_ram },
	{ "address + length overflows", 0, 8, overflow },
	{ "next index >= queue size", 0, 8, next_big },
	{ "zero-length descriptor", 0, 8, zero_len },
	{ "chain loop", 0, 8, loop },
	{ "descriptor naming itself", 0, 8, self_loop },
	{ "head >= queue size", 0, 8, head_big },
	{ "avail idx ahead by more than num", 0, 8, avail_jump },
	{ "avail idx moved backwards", 0, 8, avail_back },
	{ "device write into a read-only chain", 0, 8, readonly_write },
	{ "device write past the writable part", 0, 8, small_write },
	{ "readable after writable", 0, 8, read_after_write },
	{ "indirect not negotiated", 0, 8, indirect_off },
	{ "indirect with NEXT", F_INDIRECT, 8, indirect_next },
	{ "indirect length not a multiple of 16", F_INDIRECT, 8, indirect_len },
	{ "indirect length 0", F_INDIRECT, 8, indirect_zero },
	{ "indirect table outside RAM", F_INDIRECT, 8, indirect_outside },
	{ "indirect table longer than num", F_INDIRECT, 8, indirect_long },
	{ "indirect inside indirect", F_INDIRECT, 8, indirect_nested },
	{ "loop inside an indirect table", F_INDIRECT, 8, indirect_loop },
	{ "indirect next beyond its table", F_INDIRECT, 8, indirect_next_big },
	{ "indirect buffer beyond RAM", F_INDIRECT, 8, indirect_bad_buf },
	{ "chain longer than the device maps", 0, 128, too_many },
	{ "descriptor table unaligned", 0, 0, q_desc_unaligned },
	{ "available ring unaligned", 0, 0, q_avail_unaligned },
	{ "used ring unaligned", 0, 0, q_used_unaligned },
	{ "queue size above the maximum", 0, 0, q_oversized },
	{ "queue size not a power of 2", 0, 0, q_not_pow2 },
	{ "queue size 0", 0, 0, q_zero },
	{ "descriptor table outside RAM", 0, 0, q_desc_outside },
	{ "used ring's avail_event outside RAM", 0, 0, q_used_event_outside },
	{ "available ring address wraps", 0, 0, q_avail_wraps },
	{ "used ring over the available ring", 0, 0, q_used_on_avail },
	{ "descriptor table over the used ring", 0, 0, q_desc_on_used },
	{ "descriptor table over the available ring", 0, 0, q_desc_on_avail },
};

/* After the driver resets the device, a good request works. */
static void recovers(struct drv *d, const char *name)
{
	uint32_t id, len;

	drv_start(d, F_V1, 8);
	d->dev.reply_bytes = -1;
	drv_desc(d, d->desc_gpa, 0, BUF(0), 8, N, 1);
	drv_desc(d, d->desc_gpa, 1, BUF(1), 8, W, 0);
	drv_offer(d, 0);
	drv_kick(d, 0);
	drv_used_elem(d, 0, &id, &len);
	TEST_CHECK(!drv_needs_reset(d) && drv_used_idx(d) == 1 && id == 0 && len == 8,
		   "%s: works again after a reset", name);
}

static void run_case(const struct hostile *c)
{
	unsigned lines = drv_needs_reset_lines;
	uint8_t ro[64];
	struct drv d;

	drv_init(&d, &test_dev_ops);
	memset(drv_host(&d, BUF(0)), 0x11, 64);
	memcpy(ro, drv_host(&d, BUF(0)), sizeof(ro));
	if (c->num) {
		drv_start(&d, F_V1 | c->features, c->num);
		c->run(&d);
		drv_kick(&d, 0);
	} else {
		c->run(&d);
	}
	TEST_CHECK(drv_needs_reset(&d), "%s: NEEDS_RESET", c->name);
	TEST_CHECK(drv_needs_reset_lines == lines + 1, "%s: %u log lines", c->name,
		   drv_needs_reset_lines - lines);
	TEST_CHECK(drv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG && d.irq_level,
		   "%s: configuration change interrupt", c->name);
	TEST_CHECK(!c->num || drv_used_idx(&d) == 0, "%s: no used entry", c->name);
	TEST_CHECK(!memcmp(ro, drv_host(&d, BUF(0)), sizeof(ro)), "%s: readable buffer untouched",
		   c->name);
	TEST_CHECK(d.dirty_outside == 0, "%s: dirty report outside RAM", c->name);
	/* Stopped: more kicks do nothing and log nothing. */
	drv_kick(&d, 0);
	TEST_CHECK(d.dev.chains == 0 && drv_needs_reset_lines == lines + 1,
		   "%s: no work while NEEDS_RESET", c->name);
	recovers(&d, c->name);
	drv_fini(&d);
}

int main(void)
{
	drv_count_log();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
	printf("%zu hostile cases\n", sizeof(cases) / sizeof(cases[0]));
	TEST_EXIT();
}
