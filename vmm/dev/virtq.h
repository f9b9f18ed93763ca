/* SPDX-License-Identifier: MIT */
/*
 * Split virtqueues over guest RAM (virtio 1.2, 2.7), the device's side.
 *
 * Everything in the rings comes from the guest: every index, descriptor
 * address, length and flag is read once into a local and checked against
 * guest RAM (struct virtq_mem) and the queue size before it is used. A bad
 * one makes the call return -EPROTO with vq->err naming what was wrong; the
 * transport then puts the device in NEEDS_RESET (virtio_mmio.h). Nothing
 * outside guest RAM is ever read or written, and every walk is bounded by
 * the queue size (a chain can never loop).
 *
 * Every byte the device writes into guest RAM (used ring, avail_event,
 * buffers written through virtq_elem_write) is reported to mem->mark_dirty
 * right after it is written (a report before the write could be harvested
 * before the bytes change, and the change then never re-sent): those
 * writes happen behind KVM's dirty tracking.
 *
 * Barriers: the guest's vCPU and the device run on different host threads.
 * Ring indices are read and written with atomic 16-bit accesses; the avail
 * index is read with acquire before the entries it covers, used entries
 * are written before the used index is released, and a full fence orders
 * the used index (or avail_event) against the read of the driver's
 * suppression fields, as the spec's 2.7.7 and 2.7.10 ask.
 *
 * Threads: a queue belongs to its transport (struct virtio_mmio) and every
 * call here runs under that transport's lock (virtio_mmio.h), whichever
 * thread makes it (a vCPU's notify or a device's I/O thread).
 */
#ifndef GW_VMM_VIRTQ_H
#define GW_VMM_VIRTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * A full barrier between the device's and the driver's threads (a store
 * then a load of the other side's index: event idx, notification
 * suppression). ThreadSanitizer does not model fences (GCC refuses them
 * under -fsanitize=thread): there a sequentially consistent read-modify-write
 * stands in, a locked instruction and so a full barrier on x86 as well.
 */
#if defined(__SANITIZE_THREAD__)
static inline void virtq_mb(void)
{
	static int order;

	__atomic_fetch_add(&order, 0, __ATOMIC_SEQ_CST);
}
#else
static inline void virtq_mb(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif

#define VIRTQ_MEM_MAX_RANGES	8
#define VIRTQ_NUM_MAX		1024u	/* the largest queue any device here offers */
#define VIRTQ_ELEM_MAX_IOV	64u	/* descriptors one chain may map (Linux uses <= 19) */
#define VIRTQ_ELEM_MAX_BYTES	(1u << 30)	/* a chain's total length, readable + writable */

/*
 * Guest RAM as the device sees it: disjoint ranges of guest-physical
 * addresses, each mapped at a host address. Set at creation (or at a RAM
 * remap with every queue stopped), read-only while queues run.
 */
struct virtq_mem_range {
	uint64_t gpa;			/* first guest-physical byte */
	uint8_t *host;			/* its host mapping */
	uint64_t len_bytes;
};

struct virtq_mem {
	struct virtq_mem_range ranges[VIRTQ_MEM_MAX_RANGES];
	unsigned nr;
	/* Every guest RAM span the device writes; NULL: nobody tracks. */
	void (*mark_dirty)(void *opaque, uint64_t gpa, uint64_t len_bytes);
	void *dirty_opaque;
};

/* Add a range. 0, or -EINVAL (overlap, overflow, gpa and host not 16-aligned alike) / -ENOSPC. */
int virtq_mem_add(struct virtq_mem *m, uint64_t gpa, void *host, uint64_t len_bytes);
/*
 * The host address of [gpa, gpa + len) when all of it lies in one range,
 * else NULL (also when gpa + len overflows). len 0 is refused too.
 */
void *virtq_mem_map(const struct virtq_mem *m, uint64_t gpa, uint64_t len_bytes);
void virtq_mem_dirty(const struct virtq_mem *m, uint64_t gpa, uint64_t len_bytes);

/*
 * One queue. Configuration (num, addresses, features) is written by the
 * transport before virtq_enable; the rest is the device's running state.
 * All under the owning transport's lock.
 */
struct virtq {
	/* set by the driver through the transport, while not ready */
	uint32_t num;			/* queue size: a power of 2, <= num_max */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	/* from negotiation, at enable */
	bool event_idx, indirect;
	bool ready;			/* enabled and checked: the rings below are valid */
	/* resolved at enable: host views of the three areas */
	uint8_t *desc, *avail, *used;
	/* running state (migrates) */
	uint16_t last_avail_idx;	/* next avail entry the device takes */
	uint16_t used_idx;		/* next used entry the device writes (published) */
	uint16_t signalled_used;	/* used idx at the last interrupt decision */
	bool signalled_valid;		/* false: notify at the next decision */
	const struct virtq_mem *mem;	/* set at enable */
	const char *err;		/* the first guest error (static string), NULL = none */
	uint64_t err_value;		/* the offending value */
};

/* A chain popped from the available ring: readable buffers first, then writable. */
struct virtq_elem {
	uint16_t head;			/* descriptor index the used entry names */
	unsigned nr_out, nr_in;		/* iov[0..nr_out) readable, then nr_in writable */
	uint32_t out_bytes, in_bytes;
	struct iovec iov[VIRTQ_ELEM_MAX_IOV];
	uint64_t gpa[VIRTQ_ELEM_MAX_IOV];	/* guest address of each iov (dirty reports) */
};

/*
 * Check the queue's configuration against guest RAM and enable it.
 * 0, or -EINVAL with vq->err set (size not a power of 2 or above
 * @num_max, an area unaligned or outside guest RAM).
 */
int virtq_enable(struct virtq *vq, const struct virtq_mem *mem, uint32_t num_max,
		 bool event_idx, bool indirect);
/* Back to the reset state (configuration and running state cleared). */
void virtq_reset(struct virtq *vq);

/* 1: @e holds the next chain; 0: nothing available; -EPROTO: vq->err says why. */
int virtq_pop(struct virtq *vq, struct virtq_elem *e);
/*
 * Copy @len bytes at offset @off of the chain's writable part from @src,
 * reporting the spans written. 0, or -EPROTO when they do not fit.
 */
int virtq_elem_write(struct virtq *vq, const struct virtq_elem *e, uint32_t off,
		     const void *src, uint32_t len);
/* Copy readable bytes [off, off + len) of the chain to @dst. 0 or -EPROTO. */
int virtq_elem_read(struct virtq *vq, const struct virtq_elem *e, uint32_t off, void *dst,
		    uint32_t len);
/*
 * Return a chain to the driver: @written bytes of it were written (at most
 * in_bytes, else -EPROTO). Publishes the used index. 0 or -EPROTO.
 */
int virtq_push(struct virtq *vq, const struct virtq_elem *e, uint32_t written);
/*
 * After pushes: does the driver want an interrupt now? Never when nothing
 * was used since the last decision; else EVENT_IDX's used_event, or
 * VRING_AVAIL_F_NO_INTERRUPT without it.
 */
bool virtq_should_interrupt(struct virtq *vq);
/*
 * Ask for (or suppress) the driver's notifications. With @on, returns true
 * when buffers became available meanwhile (the caller polls once more).
 */
bool virtq_set_notify(struct virtq *vq, bool on);
/* Available entries not taken yet (0 when the queue is not ready). -EPROTO when insane. */
int virtq_pending(struct virtq *vq);

#endif
