/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the soft VM's way of running a device works across threads.
 * A "vCPU" (this thread) reaches the device only through the register entry
 * point (vmm_mmio_access) and sleeps in vmm_irq_lines_wait until the
 * device's interrupt; the device answers on its own I/O thread (woken by the
 * notify, taking the transport's lock). 20000 requests in batches of 1 to 4
 * are each answered once, in order, with the right bytes, each batch
 * after an interrupt, and the ack lowers the line. The barriers of virtq.c are what make the two
 * threads agree (run under TSan by the CI's TSan build). Timing never
 * decides: a wait gives up only after 10 s.
 */
#include <endian.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include "dev/irq_lines.h"
#include "drv.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define F_V1 VIRTIO_FEATURE(VIRTIO_F_VERSION_1)
#define BUF(n) (DRV_RAM_GPA + 0x4000 + 0x100ull * (n))
#define REQUESTS 20000u
#define WAIT_NS (10ull * 1000000000u)

static sem_t kick;
static atomic_bool stop;

static void notify_hook(struct virtio_mmio *t, unsigned q)
{
	(void)t, (void)q;
	sem_post(&kick);		/* under the lock: only wake the I/O thread */
}

static const struct virtio_dev_ops threaded_ops = {
	.name = "test-threaded",
	.device_id = TEST_DEV_ID,
	.nr_queues = 1,
	.queue_num_max = 8,
	.queue_notify = notify_hook,
};

static void *io_main(void *arg)
{
	struct virtio_mmio *t = arg;

	while (!atomic_load(&stop)) {
		sem_wait(&kick);
		virtio_mmio_lock(t);
		test_dev_drain(t, 0);
		virtio_mmio_unlock(t);
	}
	return NULL;
}

static uint16_t used_idx(struct drv *d)
{
	return le16toh(__atomic_load_n((uint16_t *)drv_host(d, d->used_gpa + 2), __ATOMIC_ACQUIRE));
}

/* Offer @n requests (one writable 16-byte buffer each), kick, wait for all of them. */
static unsigned batch(struct drv *d, struct vmm_irq_lines *lines, unsigned n)
{
	uint16_t want = (uint16_t)(d->avail_idx + n);
	unsigned bad = 0;

	for (unsigned i = 0; i < n; i++) {
		uint16_t head = (uint16_t)((d->avail_idx) % 8);

		memset(drv_host(d, BUF(head)), 0, 16);
		drv_desc(d, d->desc_gpa, head, BUF(head), 16, VIRTQ_DESC_F_WRITE, 0);
		drv_offer(d, head);
	}
	drv_kick(d, 0);
	while (used_idx(d) != want) {
		uint32_t isr;

		TEST_ASSERT(vmm_irq_lines_wait(lines, 1u << DRV_GSI, WAIT_NS), "no interrupt in 10 s");
		isr = drv_rd(d, VIRTIO_MMIO_INTERRUPT_STATUS);
		drv_wr(d, VIRTIO_MMIO_INTERRUPT_ACK, isr);
	}
	for (uint16_t u = (uint16_t)(want - n); u != want; u++) {
		uint32_t id, len;
		const uint8_t *b;

		drv_used_elem(d, u, &id, &len);
		b = drv_host(d, BUF(id));
		/* The test device's pattern: 0xa5 ^ its chain count, which is u. */
		bad += id != u % 8 || len != 16 || b[0] != (uint8_t)(0xa5 ^ u) || b[0] != b[15];
	}
	return bad;
}

int main(void)
{
	struct vmm_irq_lines lines;
	pthread_t io;
	struct drv d;
	unsigned bad = 0, done = 0;

	drv_count_log();
	TEST_ASSERT(sem_init(&kick, 0, 0) == 0 && vmm_irq_lines_init(&lines) == 0, "init");
	drv_init(&d, &test_dev_ops);
	d.dev.reply_all = true;
	virtio_mmio_destroy(&d.t);
	TEST_ASSERT(virtio_mmio_init(&d.t, &threaded_ops, &d.dev, "virtio-soft0", DRV_MMIO_GPA,
				     DRV_GSI, &d.mem, &vmm_irq_lines_ops, &lines) == 0, "transport");
	TEST_ASSERT(pthread_create(&io, NULL, io_main, &d.t) == 0, "I/O thread");
	drv_start(&d, F_V1, 8);
	while (done < REQUESTS) {
		unsigned n = 1 + done % 4;

		bad += batch(&d, &lines, n);
		done += n;
	}
	TEST_CHECK(bad == 0, "%u of %u answers wrong", bad, done);
	TEST_CHECK(!drv_needs_reset(&d) && d.dev.chains == done, "%u chains answered", d.dev.chains);
	atomic_store(&stop, true);
	sem_post(&kick);
	pthread_join(io, NULL);
	/* The last batch's interrupt may come after its used index: ack it, the line drops. */
	drv_wr(&d, VIRTIO_MMIO_INTERRUPT_ACK, drv_rd(&d, VIRTIO_MMIO_INTERRUPT_STATUS));
	TEST_CHECK(vmm_irq_lines_level(&lines) == 0, "acked: the line is low");
	drv_fini(&d);
	vmm_irq_lines_destroy(&lines);
	sem_destroy(&kick);
	TEST_EXIT();
}
