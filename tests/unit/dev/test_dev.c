/* SPDX-License-Identifier: MIT */
/* The test device of drv.h: a two-queue "answer every chain" device. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "drv.h"

static void config_read(struct virtio_mmio *t, uint32_t off, void *data, uint32_t len)
{
	struct test_dev *dev = t->dev;

	memcpy(data, dev->config + off, len);
}

static void config_write(struct virtio_mmio *t, uint32_t off, const void *data, uint32_t len)
{
	struct test_dev *dev = t->dev;

	memcpy(dev->config + off, data, len);
	virtio_mmio_config_changed(t);
}

/* One chain: read it all, write the reply, push. 0 or -EPROTO. */
static int answer(struct virtio_mmio *t, struct virtq *vq, struct test_dev *dev)
{
	struct virtq_elem *e = &dev->elem;
	uint8_t buf[512];
	uint32_t reply, done = 0;
	int ret;

	for (uint32_t off = 0; off < e->out_bytes; off += sizeof(buf)) {
		uint32_t n = e->out_bytes - off < sizeof(buf) ? e->out_bytes - off : sizeof(buf);

		ret = virtq_elem_read(vq, e, off, buf, n);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < n; i++)
			dev->out_sum += buf[i];
	}
	reply = dev->reply_all ? e->in_bytes :
		dev->reply_bytes >= 0 ? (uint32_t)dev->reply_bytes :
		(e->out_bytes < e->in_bytes ? e->out_bytes : e->in_bytes);
	memset(buf, 0xa5 ^ (uint8_t)dev->chains, sizeof(buf));
	while (done < reply) {
		uint32_t n = reply - done < sizeof(buf) ? reply - done : sizeof(buf);

		ret = virtq_elem_write(vq, e, done, buf, n);
		if (ret)
			return ret;
		done += n;
	}
	dev->chains++;
	return virtq_push(vq, e, reply);
}

/* Drain the queue with notifications off, then on again and look once more (2.7.10). */
void test_dev_drain(struct virtio_mmio *t, unsigned q)
{
	struct test_dev *dev = t->dev;
	struct virtq *vq = virtio_mmio_queue(t, q);
	unsigned budget;
	int ret = 0;

	if (!vq)
		return;
	dev->drains++;
	/*
	 * A budget per notification: a guest on another vCPU (or writes of the
	 * device into the guest's own ring, through its buffers) can keep
	 * offering work forever, and this runs on the notifying vCPU.
	 */
	budget = 4 * vq->num;
	do {
		virtq_set_notify(vq, false);
		while (budget && (ret = virtq_pop(vq, &dev->elem)) == 1) {
			budget--;
			ret = answer(t, vq, dev);
			if (ret)
				break;
		}
		virtio_mmio_used(t, q);
		if (ret < 0) {
			virtio_mmio_check(t, q, ret);
			return;
		}
	} while (virtq_set_notify(vq, true) && budget);
}

static void queue_notify(struct virtio_mmio *t, unsigned q)
{
	test_dev_drain(t, q);
}

static void reset(struct virtio_mmio *t)
{
	struct test_dev *dev = t->dev;

	dev->resets++;
	dev->chains = 0;
}

static int save(struct virtio_mmio *t, struct gw_wbuf *w)
{
	struct test_dev *dev = t->dev;

	gw_put_bytes(w, dev->config, sizeof(dev->config));
	gw_put_le32(w, dev->chains);
	return 0;
}

static int load(struct virtio_mmio *t, struct gw_rbuf *r, char *why, size_t why_len)
{
	struct test_dev *dev = t->dev;
	const void *cfg = gw_get_bytes(r, sizeof(dev->config));
	uint32_t chains = gw_get_le32(r);

	if (!cfg || gw_rbuf_done(r)) {
		snprintf(why, why_len, "test device: %zu bytes, expected %zu", r->len,
			 sizeof(dev->config) + 4);
		return -EINVAL;
	}
	memcpy(dev->config, cfg, sizeof(dev->config));
	dev->chains = chains;
	return 0;
}

const struct virtio_dev_ops test_dev_ops = {
	.name = "test",
	.device_id = TEST_DEV_ID,
	.features = VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC) |
		    VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX) | VIRTIO_FEATURE(3),
	.nr_queues = 2,
	.queue_num_max = 256,
	.config_bytes = TEST_DEV_CONFIG_BYTES,
	.config_read = config_read,
	.config_write = config_write,
	.queue_notify = queue_notify,
	.reset = reset,
	.save = save,
	.load = load,
};

const struct virtio_dev_ops test_dev_plain_ops = {
	.name = "test-plain",
	.device_id = TEST_DEV_ID,
	.features = 0,
	.nr_queues = 1,
	.queue_num_max = 16,
	.queue_notify = queue_notify,
	.reset = reset,
};
