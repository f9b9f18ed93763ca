/* SPDX-License-Identifier: MIT */
/*
 * The virtqueue walk and the virtio-mmio transport against a hostile guest
 * (input format: fuzz_virtq.h): register writes and reads, guest RAM
 * content (descriptor tables, rings, buffers), notifications, state
 * sections. Guest RAM lies between PROT_NONE guard pages (tests/unit/dev/
 * drv.c), so any device access outside it crashes. Invariants after every
 * operation: every RAM byte the device changed was reported dirty, no
 * report falls outside RAM, the interrupt line is high exactly while the
 * interrupt status is non-zero, the device's own state re-encodes and
 * decodes, and every walk ends (libFuzzer's -timeout catches a hang).
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "drv.h"
#include "fuzz.h"
#include "fuzz_virtq.h"

static struct drv d;
static uint8_t shadow[DRV_RAM_BYTES];	/* RAM as the guest last wrote it */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	drv_init(&d, &test_dev_ops);	/* one mapping for the run; drv_reset per input */
	return 0;
}

struct in {
	const uint8_t *p;
	size_t left;
};

static bool take(struct in *in, void *out, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

/*
 * Every byte that differs from what the guest wrote was reported by the
 * device. Only a drain of a queue makes the device write (@wrote: one ran).
 */
static void check(bool wrote)
{
	if (wrote && memcmp(shadow, d.ram, DRV_RAM_BYTES)) {
		for (unsigned i = 0; i < DRV_RAM_BYTES; i++)
			fuzz_check(shadow[i] == d.ram[i] || d.dirty[i], "device write not reported dirty");
		memcpy(shadow, d.ram, DRV_RAM_BYTES);
	}
	if (wrote)
		drv_dirty_clear(&d);
	fuzz_check(d.dirty_outside == 0, "dirty report outside guest RAM");
	fuzz_check(d.irq_level == (d.t.isr != 0), "interrupt line follows the interrupt status");
}

static void ram_write(struct in *in)
{
	uint8_t buf[256], n;
	uint16_t off;

	if (!take(in, &off, 2) || !take(in, &n, 1))
		return;
	off = le16toh(off);
	if (n > in->left)
		n = (uint8_t)in->left;
	take(in, buf, n);
	if ((size_t)off + n > DRV_RAM_BYTES)
		n = (uint8_t)(DRV_RAM_BYTES - off);
	memcpy(d.ram + off, buf, n);
	memcpy(shadow + off, buf, n);
}

static void queue(struct in *in)
{
	uint8_t q, lg;
	uint16_t off[3];

	if (!take(in, &q, 1) || !take(in, &lg, 1) || !take(in, off, sizeof(off)))
		return;
	drv_queue(&d, q % 4, 1u << (lg % 11), DRV_RAM_GPA + le16toh(off[0]),
		  DRV_RAM_GPA + le16toh(off[1]), DRV_RAM_GPA + le16toh(off[2]));
}

static void negotiate(struct in *in)
{
	uint64_t f;

	if (!take(in, &f, 8))
		return;
	drv_negotiate(&d, le64toh(f));
	drv_wr(&d, VIRTIO_MMIO_STATUS, drv_rd(&d, VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
}

/* The device's own encoding always decodes, and changes nothing. */
static void state(void)
{
	static uint8_t a[4096], b[4096];
	struct gw_wbuf w;
	char why[256];
	size_t an;
	int ret;

	gw_wbuf_init(&w, a, sizeof(a));
	fuzz_check(virtio_mmio_encode(&d.t, &w) == 0, "encode");
	an = w.len;
	ret = virtio_mmio_decode(&d.t, a, an, VIRTIO_MMIO_STATE_VERSION, why, sizeof(why));
	if (ret)
		fprintf(stderr, "decode of own state: %s\n", why);
	fuzz_check(ret == 0, "own state decodes");
	gw_wbuf_init(&w, b, sizeof(b));
	fuzz_check(virtio_mmio_encode(&d.t, &w) == 0 && w.len == an && !memcmp(a, b, an),
		   "state round trip");
}

static void section(struct in *in)
{
	uint8_t buf[256], n;
	char why[256];

	if (!take(in, &n, 1))
		return;
	if (n > in->left)
		n = (uint8_t)in->left;
	take(in, buf, n);
	virtio_mmio_decode(&d.t, buf, n, VIRTIO_MMIO_STATE_VERSION, why, sizeof(why));
}

static void kick(uint8_t q)
{
	unsigned reply = q >> 2 & 3;

	d.dev.reply_all = reply == FV_REPLY_ALL;
	d.dev.reply_bytes = reply == FV_REPLY_NONE ? 0 : reply == FV_REPLY_100 ? 100 : -1;
	drv_kick(&d, q & 3);
	d.dev.reply_all = false;
	d.dev.reply_bytes = -1;
}

static void one_op(struct in *in, uint8_t op)
{
	uint16_t off;
	uint32_t v;
	uint8_t q;

	switch (op & 7) {
	case FV_REG_WRITE:
		if (take(in, &off, 2) && take(in, &v, 4))
			drv_wr(&d, le16toh(off) % 0x200 & ~3u, le32toh(v));
		break;
	case FV_REG_READ:
		if (take(in, &off, 2))
			drv_rd(&d, le16toh(off) % 0x200 & ~3u);
		break;
	case FV_RAM_WRITE:
		ram_write(in);
		break;
	case FV_KICK:
		if (take(in, &q, 1))
			kick(q);
		break;
	case FV_QUEUE:
		queue(in);
		break;
	case FV_NEGOTIATE:
		negotiate(in);
		break;
	case FV_STATE:
		state();
		break;
	default:
		section(in);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint8_t op;

	drv_reset(&d, &test_dev_ops);
	memset(shadow, 0, sizeof(shadow));
	while (take(&in, &op, 1)) {
		unsigned drains = d.dev.drains;

		one_op(&in, op);
		check(d.dev.drains != drains);
	}
	if (getenv("GW_FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_virtq: status %#x, %u chains answered, queue 0 used %u\n",
			d.t.status, d.dev.chains, d.t.vq[0].used_idx);
	return 0;
}
