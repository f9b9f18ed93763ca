/* SPDX-License-Identifier: MIT */
/*
 * The guest's virtio-net driver (vnet_drv.h). Register offsets and bits are
 * the virtio 1.2 specification's fixed numbers (section 4.2.2; the device
 * side spells them in vmm/dev/virtio_regs.h, which this freestanding file
 * cannot include). Every ring field is little-endian; the driver runs on
 * little-endian x86-64 only (asserted).
 */
#include "vnet_drv.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rings are read natively");
_Static_assert(sizeof(struct vnet_drv_state) <= 0x1000, "state fits its page");
_Static_assert(VNET_DRV_USED_OFF + 4 + 8 * VNET_DRV_QUEUE_NUM <= 0x1000, "rings fit their page");

/* Registers (virtio-mmio v2) and bits. */
#define R_MAGIC		0x000
#define R_VERSION	0x004
#define R_DEVICE_ID	0x008
#define R_DEV_FEAT	0x010
#define R_DEV_FEAT_SEL	0x014
#define R_DRV_FEAT	0x020
#define R_DRV_FEAT_SEL	0x024
#define R_QUEUE_SEL	0x030
#define R_QUEUE_NUM_MAX	0x034
#define R_QUEUE_NUM	0x038
#define R_QUEUE_READY	0x044
#define R_QUEUE_NOTIFY	0x050
#define R_INT_STATUS	0x060
#define R_INT_ACK	0x064
#define R_STATUS	0x070
#define R_DESC_LO	0x080
#define R_DESC_HI	0x084
#define R_AVAIL_LO	0x090
#define R_AVAIL_HI	0x094
#define R_USED_LO	0x0a0
#define R_USED_HI	0x0a4
#define R_CONFIG	0x100
#define MMIO_MAGIC	0x74726976u
#define NET_DEVICE_ID	1u
#define ST_ACK		0x01u
#define ST_DRIVER	0x02u
#define ST_DRIVER_OK	0x04u
#define ST_FEATURES_OK	0x08u
#define ST_NEEDS_RESET	0x40u
#define ST_FAILED	0x80u
#define F_NET_MAC	5	/* feature word 0 */
#define F_VERSION_1	0	/* bit 32: feature word 1, bit 0 */
#define DESC_F_WRITE	0x2u
#define AVAIL_F_NO_INTERRUPT 0x1u
#define USED_F_NO_NOTIFY 0x1u
#define RXQ 0u
#define TXQ 1u

static uint32_t rd(struct vnet_drv *d, uint32_t off)
{
	return d->io.rd32(d->io.ctx, off);
}

static void wr(struct vnet_drv *d, uint32_t off, uint32_t v)
{
	d->io.wr32(d->io.ctx, off, v);
}

static uint8_t *qpage(struct vnet_drv *d, unsigned q)
{
	return d->area + (q == RXQ ? VNET_DRV_RXQ_OFF : VNET_DRV_TXQ_OFF);
}

static uint32_t buf_off(unsigned q, unsigned i)
{
	return (q == RXQ ? VNET_DRV_RXBUF_OFF : VNET_DRV_TXBUF_OFF) + i * VNET_DRV_BUF_BYTES;
}

/* A full barrier: a locked RMW (x86 `lock xadd`), which TSan models too. */
static void full_mb(struct vnet_drv *d)
{
	__atomic_fetch_add(&d->st->fence, 0, __ATOMIC_SEQ_CST);
}

static uint16_t used_idx(struct vnet_drv *d, unsigned q)
{
	return __atomic_load_n((uint16_t *)(qpage(d, q) + VNET_DRV_USED_OFF + 2), __ATOMIC_ACQUIRE);
}

static void set_desc(struct vnet_drv *d, unsigned q, uint16_t i, uint32_t len, uint16_t flags)
{
	uint8_t *p = qpage(d, q) + 16u * i;

	*(uint64_t *)p = d->area_gpa + buf_off(q, i);
	*(uint32_t *)(p + 8) = len;
	*(uint16_t *)(p + 12) = flags;
	*(uint16_t *)(p + 14) = 0;
}

/* Offer buffer @i of queue @q: the ring slot, then the index (release). */
static void offer(struct vnet_drv *d, unsigned q, uint16_t i)
{
	struct vnet_drv_ring *r = &d->st->q[q];
	uint8_t *avail = qpage(d, q) + VNET_DRV_AVAIL_OFF;

	*(uint16_t *)(avail + 4 + 2u * (r->avail_idx % VNET_DRV_QUEUE_NUM)) = i;
	r->avail_idx++;
	__atomic_store_n((uint16_t *)(avail + 2), r->avail_idx, __ATOMIC_RELEASE);
}

static void zero(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i += 8)
		*(volatile uint64_t *)(p + i) = 0;
}

/* 8-byte words (the buffers are 8-aligned and 4 KiB long: rounding up stays inside). */
static void copy_words(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	for (uint32_t i = 0; i < n; i += 8)
		*(uint64_t *)(dst + i) = *(const uint64_t *)(src + i);
}

static int bind(struct vnet_drv *d, const struct vnet_io *io, uint64_t area_gpa, void *area)
{
	if (!io || !io->rd32 || !io->wr32 || !area || (area_gpa & 0xfff) ||
	    ((uintptr_t)area & 0xfff))
		return VNET_EINVAL;
	d->io = *io;
	d->area_gpa = area_gpa;
	d->area = area;
	d->st = (struct vnet_drv_state *)((uint8_t *)area + VNET_DRV_STATE_OFF);
	return 0;
}

static int negotiate(struct vnet_drv *d)
{
	uint32_t lo, hi;

	wr(d, R_STATUS, 0);
	wr(d, R_STATUS, ST_ACK);
	wr(d, R_STATUS, ST_ACK | ST_DRIVER);
	wr(d, R_DEV_FEAT_SEL, 0);
	lo = rd(d, R_DEV_FEAT) & (1u << F_NET_MAC);
	wr(d, R_DEV_FEAT_SEL, 1);
	hi = rd(d, R_DEV_FEAT) & (1u << F_VERSION_1);
	if (!hi)
		return VNET_EFEAT;
	wr(d, R_DRV_FEAT_SEL, 0);
	wr(d, R_DRV_FEAT, lo);
	wr(d, R_DRV_FEAT_SEL, 1);
	wr(d, R_DRV_FEAT, hi);
	wr(d, R_STATUS, ST_ACK | ST_DRIVER | ST_FEATURES_OK);
	if (!(rd(d, R_STATUS) & ST_FEATURES_OK))
		return VNET_EFEAT;
	d->st->features = (uint64_t)hi << 32 | lo;
	return 0;
}

static int queue_setup(struct vnet_drv *d, unsigned q)
{
	uint64_t base = d->area_gpa + (q == RXQ ? VNET_DRV_RXQ_OFF : VNET_DRV_TXQ_OFF);
	uint64_t avail = base + VNET_DRV_AVAIL_OFF, used = base + VNET_DRV_USED_OFF;
	int no_irq = q == TXQ || !(d->st->flags & VNET_DRV_RX_IRQ);

	zero(qpage(d, q), 0x1000);
	*(uint16_t *)(qpage(d, q) + VNET_DRV_AVAIL_OFF) = no_irq ? AVAIL_F_NO_INTERRUPT : 0;
	wr(d, R_QUEUE_SEL, q);
	if (rd(d, R_QUEUE_NUM_MAX) < VNET_DRV_QUEUE_NUM || rd(d, R_QUEUE_READY))
		return VNET_EQUEUE;
	wr(d, R_QUEUE_NUM, VNET_DRV_QUEUE_NUM);
	wr(d, R_DESC_LO, (uint32_t)base);
	wr(d, R_DESC_HI, (uint32_t)(base >> 32));
	wr(d, R_AVAIL_LO, (uint32_t)avail);
	wr(d, R_AVAIL_HI, (uint32_t)(avail >> 32));
	wr(d, R_USED_LO, (uint32_t)used);
	wr(d, R_USED_HI, (uint32_t)(used >> 32));
	wr(d, R_QUEUE_READY, 1);
	return 0;
}

int vnet_drv_setup(struct vnet_drv *d, const struct vnet_io *io, uint64_t area_gpa, void *area,
		   uint32_t flags)
{
	int ret = bind(d, io, area_gpa, area);

	if (ret)
		return ret;
	if (rd(d, R_MAGIC) != MMIO_MAGIC || rd(d, R_VERSION) != 2 ||
	    rd(d, R_DEVICE_ID) != NET_DEVICE_ID)
		return VNET_ENODEV;
	zero((uint8_t *)d->st, 0x1000);
	d->st->flags = flags & VNET_DRV_RX_IRQ;
	ret = negotiate(d);
	if (!ret)
		ret = queue_setup(d, RXQ);
	if (!ret)
		ret = queue_setup(d, TXQ);
	if (ret) {
		wr(d, R_STATUS, rd(d, R_STATUS) | ST_FAILED);
		return ret;
	}
	for (unsigned i = 0; d->st->features & (1u << F_NET_MAC) && i < 6; i++)
		d->st->mac[i] = (uint8_t)(rd(d, R_CONFIG + (i & ~3u)) >> 8 * (i & 3));
	for (uint16_t i = 0; i < VNET_DRV_QUEUE_NUM; i++) {
		set_desc(d, RXQ, i, VNET_DRV_BUF_BYTES, DESC_F_WRITE);
		offer(d, RXQ, i);
	}
	d->st->magic = VNET_DRV_MAGIC;
	wr(d, R_STATUS, ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK);
	return vnet_drv_flush(d);
}

int vnet_drv_attach(struct vnet_drv *d, const struct vnet_io *io, uint64_t area_gpa, void *area)
{
	int ret = bind(d, io, area_gpa, area);

	if (ret)
		return ret;
	return d->st->magic == VNET_DRV_MAGIC ? 0 : VNET_ENODEV;
}

int vnet_drv_err(const struct vnet_drv *d)
{
	return d->st->err;
}

static int fail(struct vnet_drv *d, int err)
{
	if (!d->st->err)
		d->st->err = err;
	return d->st->err;
}

int vnet_drv_rx_pending(struct vnet_drv *d)
{
	return used_idx(d, RXQ) != d->st->q[RXQ].used_seen;
}

int vnet_drv_rx_peek(struct vnet_drv *d, struct vnet_frame *f)
{
	struct vnet_drv_ring *r = &d->st->q[RXQ];
	const uint8_t *ent;
	uint32_t id, len;

	if (d->st->err)
		return d->st->err;
	/* At most a ring of short frames per call: a device cannot keep the guest here. */
	for (unsigned n = 0; n < VNET_DRV_QUEUE_NUM; n++) {
		uint16_t used = used_idx(d, RXQ);

		if (used == r->used_seen)
			return 0;
		if ((uint16_t)(r->avail_idx - r->used_seen) < (uint16_t)(used - r->used_seen))
			return fail(d, VNET_EPROTO);	/* more used than offered */
		ent = qpage(d, RXQ) + VNET_DRV_USED_OFF + 4 + 8u * (r->used_seen % VNET_DRV_QUEUE_NUM);
		id = *(const uint32_t *)ent;
		len = *(const uint32_t *)(ent + 4);
		if (id >= VNET_DRV_QUEUE_NUM || len < VNET_DRV_HDR_BYTES || len > VNET_DRV_BUF_BYTES)
			return fail(d, VNET_EPROTO);
		f->id = (uint16_t)id;
		f->data = d->area + buf_off(RXQ, id) + VNET_DRV_HDR_BYTES;
		f->len_bytes = len - VNET_DRV_HDR_BYTES;
		if (f->len_bytes >= VNET_DRV_FRAME_MIN_BYTES)
			return 1;
		d->st->rx_dropped++;
		vnet_drv_rx_done(d, f);
	}
	return 0;
}

void vnet_drv_rx_done(struct vnet_drv *d, const struct vnet_frame *f)
{
	struct vnet_drv_ring *r = &d->st->q[RXQ];

	r->used_seen++;
	d->st->rx_frames += f->len_bytes >= VNET_DRV_FRAME_MIN_BYTES;
	offer(d, RXQ, f->id);	/* its descriptor is the one setup wrote */
}

unsigned vnet_drv_tx_reclaim(struct vnet_drv *d)
{
	struct vnet_drv_ring *r = &d->st->q[TXQ];
	uint16_t used = used_idx(d, TXQ), n = (uint16_t)(used - r->used_seen);

	if (n > (uint16_t)(r->avail_idx - r->used_seen)) {
		fail(d, VNET_EPROTO);	/* more used than offered */
		return 0;
	}
	r->used_seen = used;
	return n;
}

/* The next free transmit buffer (in order: the slot avail_idx % num), or NULL. */
static uint8_t *tx_slot(struct vnet_drv *d, uint16_t *id)
{
	struct vnet_drv_ring *r = &d->st->q[TXQ];

	if ((uint16_t)(r->avail_idx - r->used_seen) >= VNET_DRV_QUEUE_NUM)
		vnet_drv_tx_reclaim(d);
	if (d->st->err || (uint16_t)(r->avail_idx - r->used_seen) >= VNET_DRV_QUEUE_NUM) {
		d->st->tx_full += !d->st->err;
		return 0;
	}
	*id = r->avail_idx % VNET_DRV_QUEUE_NUM;
	return d->area + buf_off(TXQ, *id);
}

static void tx_publish(struct vnet_drv *d, uint16_t id, uint32_t len_bytes)
{
	set_desc(d, TXQ, id, VNET_DRV_HDR_BYTES + len_bytes, 0);
	offer(d, TXQ, id);
	d->st->tx_frames++;
}

int vnet_drv_tx(struct vnet_drv *d, const uint8_t *frame, uint32_t len_bytes)
{
	uint8_t *b;
	uint16_t id;

	if (d->st->err)
		return d->st->err;
	if (len_bytes < VNET_DRV_FRAME_MIN_BYTES || len_bytes > VNET_DRV_FRAME_MAX_BYTES)
		return VNET_EINVAL;
	b = tx_slot(d, &id);
	if (!b)
		return d->st->err ? d->st->err : VNET_EAGAIN;
	zero(b, 16);
	for (uint32_t i = 0; i < len_bytes; i++)
		b[VNET_DRV_HDR_BYTES + i] = frame[i];
	tx_publish(d, id, len_bytes);
	return 0;
}

int vnet_drv_flush(struct vnet_drv *d)
{
	if (d->st->err)
		return d->st->err;
	for (unsigned q = RXQ; q <= TXQ; q++) {
		struct vnet_drv_ring *r = &d->st->q[q];

		if (r->kicked_idx == r->avail_idx)
			continue;
		r->kicked_idx = r->avail_idx;
		full_mb(d);	/* the index store before the read of the device's flag */
		if (__atomic_load_n((uint16_t *)(qpage(d, q) + VNET_DRV_USED_OFF), __ATOMIC_ACQUIRE) &
		    USED_F_NO_NOTIFY)
			continue;
		wr(d, R_QUEUE_NOTIFY, q);
		d->st->kicks++;
		if (rd(d, R_STATUS) & ST_NEEDS_RESET)
			return fail(d, VNET_ERESET);
	}
	return 0;
}

uint32_t vnet_drv_irq_ack(struct vnet_drv *d)
{
	uint32_t st = rd(d, R_INT_STATUS) & 3u;

	if (st)
		wr(d, R_INT_ACK, st);
	return st;
}

/* Rewrite the MAC header of a frame leaving by @out (see vnet_drv.h). */
static void fwd_macs(uint8_t *eth, const struct vnet_drv *out, unsigned out_i, int swap,
		     const struct vnet_fwd_cfg *cfg)
{
	uint8_t tmp[6];

	for (unsigned i = 0; i < 6; i++)
		tmp[i] = eth[i];
	for (unsigned i = 0; i < 6; i++) {
		eth[i] = cfg && cfg->dst_set[out_i] ? cfg->dst_mac[out_i][i] : eth[6 + i];
		eth[6 + i] = swap ? tmp[i] : out->st->mac[i];
	}
}

/* Up to @budget frames from @in out of @out: copy, rewrite the MACs, publish. */
static int fwd_one_nic(struct vnet_drv *in, struct vnet_drv *out, unsigned out_i, int swap,
		       const struct vnet_fwd_cfg *cfg, unsigned budget)
{
	struct vnet_frame f;
	int n = 0, ret;

	while ((unsigned)n < budget && (ret = vnet_drv_rx_peek(in, &f)) == 1) {
		uint16_t id;
		uint8_t *b = tx_slot(out, &id);

		if (!b)
			break;		/* the frame waits in its buffer */
		copy_words(b, f.data - VNET_DRV_HDR_BYTES, VNET_DRV_HDR_BYTES + f.len_bytes);
		zero(b, 8);		/* the header: all zero (flags, gso, csum) */
		*(uint32_t *)(b + 8) = 0;
		fwd_macs(b + VNET_DRV_HDR_BYTES, out, out_i, swap, cfg);
		tx_publish(out, id, f.len_bytes);
		vnet_drv_rx_done(in, &f);
		n++;
	}
	if (in->st->err)
		return in->st->err;
	return out->st->err ? out->st->err : n;
}

int vnet_fwd_pass(struct vnet_drv *nics, unsigned nr, const struct vnet_fwd_cfg *cfg,
		  unsigned budget)
{
	int total = 0, ret;

	for (unsigned i = 0; i < nr; i++) {
		unsigned o = (i ^ 1u) < nr ? i ^ 1u : i;

		ret = fwd_one_nic(&nics[i], &nics[o], o, o == i, cfg, budget);
		if (ret < 0)
			return ret;
		total += ret;
	}
	for (unsigned i = 0; i < nr; i++) {
		ret = vnet_drv_flush(&nics[i]);
		if (ret < 0)
			return ret;
	}
	return total;
}
