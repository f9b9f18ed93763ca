/* SPDX-License-Identifier: MIT */
/* The fake virtio-net guest of netdrv.h. Aborts on set-up failures (the test's own bugs). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "netdrv.h"
#include "dev/virtq.h"

#define PAGE 4096u

static void die(const char *what)
{
	fprintf(stderr, "netdrv: %s\n", what);
	abort();
}

uint64_t netdrv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void mark_dirty(void *opaque, uint64_t gpa, uint64_t len)
{
	struct netdrv *d = opaque;

	if (gpa < NETDRV_RAM_GPA || gpa - NETDRV_RAM_GPA > NETDRV_RAM_BYTES ||
	    len > NETDRV_RAM_BYTES - (gpa - NETDRV_RAM_GPA)) {
		d->dirty_outside++;
		return;
	}
	/* Byte stores the driver thread reads after the used index (acquire): atomics, for TSan. */
	for (uint64_t i = 0; i < len; i++)
		__atomic_store_n(&d->dirty[gpa - NETDRV_RAM_GPA + i], 1, __ATOMIC_RELAXED);
}

static void set_level(void *opaque, uint32_t gsi, bool level)
{
	struct netdrv *d = opaque;

	if (gsi != NETDRV_GSI)
		die("interrupt on a foreign line");
	if (level && !atomic_load(&d->irq_level))
		atomic_fetch_add(&d->irq_raises, 1);
	atomic_store(&d->irq_level, level);
}

static const struct virtio_irq_ops irq_ops = { .name = "netdrv", .set_level = set_level };

static void ram_init(struct netdrv *d)
{
	memset(d, 0, sizeof(*d));
	d->peer = -1;
	d->map = mmap(NULL, NETDRV_RAM_BYTES + 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (d->map == MAP_FAILED)
		die("mmap");
	d->ram = d->map + PAGE;
	if (mprotect(d->ram, NETDRV_RAM_BYTES, PROT_READ | PROT_WRITE))
		die("mprotect");
	d->ram_gpa = NETDRV_RAM_GPA;
	d->dirty = calloc(1, NETDRV_RAM_BYTES);
	if (!d->dirty || virtq_mem_add(&d->mem, NETDRV_RAM_GPA, d->ram, NETDRV_RAM_BYTES))
		die("ram");
	d->mem.mark_dirty = mark_dirty;
	d->mem.dirty_opaque = d;
	for (unsigned q = 0; q < 2; q++) {
		d->q[q].desc = NETDRV_RAM_GPA + 0x8000ull * q;
		d->q[q].avail = d->q[q].desc + 0x1000;
		d->q[q].used = d->q[q].desc + 0x2000;
	}
}

static bool dev_init(struct netdrv *d, const char *name, const struct net_backend_ops *be,
		     const char *arg, int fd)
{
	struct virtio_net_config cfg = {
		.name = name, .backend = be, .backend_arg = arg, .backend_fd = fd,
		.mac = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 }, .mac_set = true,
		.base_gpa = NETDRV_MMIO_GPA, .gsi = NETDRV_GSI, .mem = &d->mem,
		.irq = &irq_ops, .irq_opaque = d,
	};

	d->net = virtio_net_new(&cfg);
	if (!d->net)
		return false;
	if (virtio_net_register(d->net, &d->bus))
		die("register");
	return true;
}

void netdrv_init(struct netdrv *d, const char *name)
{
	netdrv_init_sndbuf(d, name, 0);
}

void netdrv_init_sndbuf(struct netdrv *d, const char *name, int sndbuf_bytes)
{
	int sv[2];

	ram_init(d);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		die("socketpair");
	if (sndbuf_bytes && setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf_bytes,
				       sizeof(sndbuf_bytes)))
		die("SO_SNDBUF");
	d->peer = sv[0];
	if (!dev_init(d, name, &net_backend_fd, NULL, sv[1]))
		die("virtio_net_new");
}

bool netdrv_init_tap(struct netdrv *d, const char *name, const char *ifname)
{
	ram_init(d);
	return dev_init(d, name, &net_backend_tap, ifname, -1);
}

void netdrv_attach(struct netdrv *d, void *ram, uint64_t ram_gpa, const struct vmm_mmio_bus *bus,
		   uint64_t mmio_gpa)
{
	if (!d->vm_bus) {	/* first attach: a fresh driver */
		memset(d, 0, sizeof(*d));
		d->peer = -1;
		for (unsigned q = 0; q < 2; q++) {
			d->q[q].desc = ram_gpa + 0x8000ull * q;
			d->q[q].avail = d->q[q].desc + 0x1000;
			d->q[q].used = d->q[q].desc + 0x2000;
		}
	}
	d->ram = ram;
	d->ram_gpa = ram_gpa;
	d->vm_bus = bus;
	d->mmio_gpa = mmio_gpa;
}

void netdrv_fini(struct netdrv *d)
{
	virtio_net_destroy(d->net);
	d->net = NULL;
	if (d->peer >= 0)
		close(d->peer);
	if (d->map)
		munmap(d->map, NETDRV_RAM_BYTES + 2 * PAGE);
	free(d->dirty);
}

static const struct vmm_mmio_bus *bus_of(const struct netdrv *d)
{
	return d->vm_bus ? d->vm_bus : &d->bus;
}

static uint64_t mmio_of(const struct netdrv *d)
{
	return d->vm_bus ? d->mmio_gpa : NETDRV_MMIO_GPA;
}

uint32_t netdrv_rd(struct netdrv *d, uint64_t off)
{
	uint8_t b[4];

	if (!vmm_mmio_access(bus_of(d), mmio_of(d) + off, b, 4, false))
		die("read not claimed");
	return gw_le32_get(b);
}

void netdrv_wr(struct netdrv *d, uint64_t off, uint32_t v)
{
	uint8_t b[4];

	gw_le32_put(b, v);
	if (!vmm_mmio_access(bus_of(d), mmio_of(d) + off, b, 4, true))
		die("write not claimed");
}

uint32_t netdrv_setup(struct netdrv *d, uint64_t features)
{
	uint32_t st = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	d->features = features;
	netdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	netdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	netdrv_wr(d, VIRTIO_MMIO_STATUS, st);
	netdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	netdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	netdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	netdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	netdrv_wr(d, VIRTIO_MMIO_STATUS, st | VIRTIO_STATUS_FEATURES_OK);
	for (unsigned q = 0; q < 2; q++) {
		struct netdrv_q *nq = &d->q[q];

		netdrv_wr(d, VIRTIO_MMIO_QUEUE_SEL, q);
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_NUM, NETDRV_NUM);
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)nq->desc);
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(nq->desc >> 32));
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)nq->avail);
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, (uint32_t)(nq->avail >> 32));
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)nq->used);
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, (uint32_t)(nq->used >> 32));
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
		nq->avail_idx = nq->used_seen = 0;
	}
	netdrv_wr(d, VIRTIO_MMIO_STATUS, netdrv_rd(d, VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
	return netdrv_rd(d, VIRTIO_MMIO_STATUS);
}

void *netdrv_host(struct netdrv *d, uint64_t gpa)
{
	if (gpa < d->ram_gpa || gpa - d->ram_gpa >= NETDRV_RAM_BYTES)
		die("driver address outside RAM");
	return d->ram + (gpa - d->ram_gpa);
}

/* Buffer i of queue q in this driver's RAM (netdrv_buf's layout from ram_gpa). */
static void wrote(struct netdrv *d, uint64_t gpa, uint64_t len)
{
	if (d->wrote)
		d->wrote(d->wrote_opaque, gpa, len);
}

static uint64_t buf_of(const struct netdrv *d, unsigned q, unsigned i)
{
	return netdrv_buf(q, i) - NETDRV_RAM_GPA + d->ram_gpa;
}

uint64_t netdrv_buf(unsigned q, unsigned i)
{
	return NETDRV_RAM_GPA + 0x10000 + 0x40000ull * q + 0x1000ull * i;
}

void netdrv_desc(struct netdrv *d, unsigned q, uint16_t i, uint64_t gpa, uint32_t len,
		 uint16_t flags, uint16_t next)
{
	uint8_t *p = netdrv_host(d, d->q[q].desc + 16ull * i);

	gw_le64_put(p, gpa ? gpa : buf_of(d, q, i));
	gw_le32_put(p + 8, len);
	gw_le16_put(p + 12, flags);
	gw_le16_put(p + 14, next);
	wrote(d, d->q[q].desc + 16ull * i, 16);
}

void netdrv_offer(struct netdrv *d, unsigned q, uint16_t head, bool kick)
{
	struct netdrv_q *nq = &d->q[q];
	uint16_t le;

	gw_le16_put(netdrv_host(d, nq->avail + 4 + 2ull * (nq->avail_idx % NETDRV_NUM)), head);
	nq->avail_idx++;
	gw_le16_put((uint8_t *)&le, nq->avail_idx);
	__atomic_store_n((uint16_t *)netdrv_host(d, nq->avail + 2), le, __ATOMIC_RELEASE);
	wrote(d, nq->avail, 4 + 2ull * NETDRV_NUM);
	if (kick) {
		virtq_mb();
		netdrv_wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, q);
	}
}

uint16_t netdrv_used_idx(struct netdrv *d, unsigned q)
{
	uint16_t le = __atomic_load_n((uint16_t *)netdrv_host(d, d->q[q].used + 2),
				      __ATOMIC_ACQUIRE);

	return gw_le16_get((const uint8_t *)&le);
}

void netdrv_used_elem(struct netdrv *d, unsigned q, uint16_t slot, uint32_t *id, uint32_t *len)
{
	const uint8_t *p = netdrv_host(d, d->q[q].used + 4 + 8ull * (slot % NETDRV_NUM));

	*id = gw_le32_get(p);
	*len = gw_le32_get(p + 4);
}

void netdrv_post_rx_all(struct netdrv *d)
{
	for (uint16_t i = 0; i < NETDRV_NUM; i++) {
		netdrv_desc(d, VIRTIO_NET_RXQ, i, 0, NETDRV_BUF_BYTES, VIRTQ_DESC_F_WRITE, 0);
		netdrv_offer(d, VIRTIO_NET_RXQ, i, i == NETDRV_NUM - 1);
	}
}

static bool dirty_all(struct netdrv *d, uint64_t gpa, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (!__atomic_load_n(&d->dirty[gpa - NETDRV_RAM_GPA + i], __ATOMIC_RELAXED))
			return false;
	return true;
}

int netdrv_rx(struct netdrv *d, void *frame, uint32_t cap)
{
	struct netdrv_q *nq = &d->q[VIRTIO_NET_RXQ];
	uint32_t id, len, flen;
	const uint8_t *b;
	uint64_t used_ent;

	if (netdrv_used_idx(d, VIRTIO_NET_RXQ) == nq->used_seen)
		return 0;
	used_ent = nq->used + 4 + 8ull * (nq->used_seen % NETDRV_NUM);
	netdrv_used_elem(d, VIRTIO_NET_RXQ, nq->used_seen, &id, &len);
	nq->used_seen++;
	if (id >= NETDRV_NUM || len < VIRTIO_NET_HDR_BYTES || len > NETDRV_BUF_BYTES)
		return -1;
	b = netdrv_host(d, buf_of(d, VIRTIO_NET_RXQ, id));
	/* header: all zero but num_buffers = 1 */
	for (unsigned i = 0; i < VIRTIO_NET_HDR_BYTES - 2; i++)
		if (b[i])
			return -1;
	if (gw_le16_get(b + 10) != 1)
		return -1;
	if (d->dirty && (!dirty_all(d, netdrv_buf(VIRTIO_NET_RXQ, id), len) ||
			 !dirty_all(d, used_ent, 8) || !dirty_all(d, nq->used + 2, 2)))
		return -1;
	for (uint32_t i = 0; d->dirty && i < len; i++)
		__atomic_store_n(&d->dirty[netdrv_buf(VIRTIO_NET_RXQ, id) - NETDRV_RAM_GPA + i], 0,
				 __ATOMIC_RELAXED);
	flen = len - VIRTIO_NET_HDR_BYTES;
	memcpy(frame, b + VIRTIO_NET_HDR_BYTES, flen < cap ? flen : cap);
	netdrv_desc(d, VIRTIO_NET_RXQ, (uint16_t)id, 0, NETDRV_BUF_BYTES, VIRTQ_DESC_F_WRITE, 0);
	netdrv_offer(d, VIRTIO_NET_RXQ, (uint16_t)id, true);
	return (int)flen;
}

unsigned netdrv_tx_in_flight(const struct netdrv *d)
{
	return (uint16_t)(d->q[VIRTIO_NET_TXQ].avail_idx - d->q[VIRTIO_NET_TXQ].used_seen);
}

unsigned netdrv_tx_reclaim(struct netdrv *d)
{
	struct netdrv_q *nq = &d->q[VIRTIO_NET_TXQ];
	uint16_t used = netdrv_used_idx(d, VIRTIO_NET_TXQ);
	unsigned n = 0;

	while (nq->used_seen != used) {
		nq->used_seen++;
		n++;
	}
	return n;
}

int netdrv_tx(struct netdrv *d, const void *frame, uint32_t len)
{
	struct netdrv_q *nq = &d->q[VIRTIO_NET_TXQ];
	uint16_t i = nq->avail_idx % NETDRV_NUM;
	uint8_t *b;

	/* The device completes in order: slot avail_idx % num is free when fewer than num fly. */
	if (netdrv_tx_in_flight(d) >= NETDRV_NUM)
		return -1;
	b = netdrv_host(d, buf_of(d, VIRTIO_NET_TXQ, i));
	memset(b, 0, VIRTIO_NET_HDR_BYTES);
	memcpy(b + VIRTIO_NET_HDR_BYTES, frame, len);
	wrote(d, buf_of(d, VIRTIO_NET_TXQ, i), VIRTIO_NET_HDR_BYTES + len);
	netdrv_desc(d, VIRTIO_NET_TXQ, i, 0, VIRTIO_NET_HDR_BYTES + len, 0, 0);
	netdrv_offer(d, VIRTIO_NET_TXQ, i, true);
	return 0;
}

bool netdrv_needs_reset(struct netdrv *d)
{
	return netdrv_rd(d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET;
}

void netdrv_copy_guest(struct netdrv *dst, const struct netdrv *src)
{
	memcpy(dst->ram, src->ram, NETDRV_RAM_BYTES);
	/* What the source reported dirty travelled with the RAM: the checks go on from there. */
	memcpy(dst->dirty, src->dirty, NETDRV_RAM_BYTES);
	memcpy(dst->q, src->q, sizeof(dst->q));
	dst->features = src->features;
}

uint64_t netdrv_ram_hash(const struct netdrv *d)
{
	uint64_t h = 1469598103934665603ull;

	for (uint32_t i = 0; i < NETDRV_RAM_BYTES; i++)
		h = (h ^ d->ram[i]) * 1099511628211ull;
	return h;
}

uint32_t netdrv_frame_make(uint8_t *f, uint32_t seq, uint32_t len)
{
	static const uint8_t dst[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	static const uint8_t src[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };

	if (len < 24)
		len = 24;
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = NETDRV_ETHERTYPE >> 8;
	f[13] = NETDRV_ETHERTYPE & 0xff;
	gw_le32_put(f + 14, seq);
	gw_le32_put(f + 18, len);
	for (uint32_t i = 22; i < len; i++)
		f[i] = (uint8_t)(seq * 31 + i);
	return len;
}

int64_t netdrv_frame_check(const uint8_t *f, uint32_t len)
{
	uint32_t seq;

	if (len < 24 || f[12] != (NETDRV_ETHERTYPE >> 8) || f[13] != (NETDRV_ETHERTYPE & 0xff) ||
	    gw_le32_get(f + 18) != len)
		return -1;
	seq = gw_le32_get(f + 14);
	for (uint32_t i = 22; i < len; i++)
		if (f[i] != (uint8_t)(seq * 31 + i))
			return -1;
	return seq;
}
