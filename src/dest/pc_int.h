/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the destination, internal: struct gw_pc_dst and what its
 * files share. The files, one concern each (protocol: dest/postcopy.c):
 *
 *   dest/postcopy.c     PC_PREPARE .. resume, the postcopy phase's loop on the
 *                      migration thread, the end (sweep, digest, release)
 *   dest/pc_place.c     placement (each page once) and the receiver threads
 *   dest/pc_fault.c     the fault handler thread and the mapper thread
 *   dest/pc_recover.c   admission of connections, recovery
 *
 * Threads (struct gw_pc_dst belongs to the migration thread unless said):
 * the bitmaps untrusted (set before resume, then read-only), claimed,
 * received, requested, pushed and settled are per-page atomic bits; the
 * counters are atomic; req_lock orders request gathering and sending
 * against a recovery;
 * lock guards the digest sum; the fault account has its own lock.
 */
#ifndef GW_PC_DST_INT_H
#define GW_PC_DST_INT_H

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "net/admit.h"
#include "pipe/channel.h"
#include "dest/dest.h"
#include "mem/digest.h"
#include "mem/page_digest.h"
#include "mem/uffd_post.h"
#include "dest/postcopy.h"
#include "postcopy/faults.h"
#include "util/fdio.h"
#include "util/pi_mutex.h"

#define PAGE GW_PAGE_BYTES
#define NR_STRIPES 256			/* hashing locks, one per 64-page window modulo this */
#define TICK_MS 100			/* fault handler wake-up when idle */
#define STATS_MS 250			/* PC_STATS to the source */
#define FAULTS_PER_READ 256
#define MAX_RECV (GW_WIRE_MAX_CHANNELS + 1)

struct dst_recv {
	struct gw_pc_dst *pc;
	struct gw_conn *conn;		/* a data connection or s->preempt */
	struct gw_pages_in *in;
	bool preempt;
	unsigned index;
	pthread_t thread;
	bool started;			/* migration thread */
	/*
	 * Data connections: held by the receiver from the first claim of a
	 * frame's pages to the last placement (priority inheritance). The
	 * preempt receiver that finds a page it answers claimed but not yet
	 * placed takes it once, which lends its priority to a niced or
	 * preempted holder instead of leaving the vCPU waiting on it.
	 */
	pthread_mutex_t placing;
	bool placing_init;		/* migration thread */
	bool placed_last;		/* receiver thread: it placed the last page (pcd_placed) */
	struct gw_page_digest sum;	/* receiver thread; merged into pc->sum when it ends */
};

struct req_batch {
	uint32_t count;
	uint64_t pages[GW_WIRE_MAX_BATCH_PAGES];
};

struct gw_pc_dst {
	struct gw_session *s;
	struct gw_uffd_post *uffd;
	bool user_only;

	struct gw_bitmap untrusted[GW_MAX_RAM_BLOCKS];	/* set before resume, then read-only */
	struct gw_bitmap claimed[GW_MAX_RAM_BLOCKS];	/* atomic: a placement took the page */
	struct gw_bitmap received[GW_MAX_RAM_BLOCKS];	/* atomic: placed (mapped) */
	struct gw_bitmap requested[GW_MAX_RAM_BLOCKS];	/* atomic: asked on preempt, no answer yet */
	struct gw_bitmap pushed[GW_MAX_RAM_BLOCKS];	/* atomic: came by the background stream */
	struct gw_bitmap settled[GW_MAX_RAM_BLOCKS];	/* atomic, under the page's stripe lock: a trusted
							   page hashed (when verifying) and mapped or
							   about to be */

	uint64_t pages;			/* untrusted pages at the switch */
	uint64_t remaining;		/* atomic */
	uint64_t placed_requested, placed_pushed, dups, requests, placed;	/* atomic */
	bool done_sent;			/* atomic: PC_DONE reached the socket */
	bool cut_fired;			/* atomic: dst-pc-cut fired */
	bool complete;			/* COMPLETE handled */
	int nr_vcpus;			/* set with release at GO; the fault handler loads it with acquire */

	bool verify;			/* digest possible: asked, every block fd-backed */
	pthread_mutex_t stripes[NR_STRIPES];	/* priority inheritance */
	pthread_mutex_t lock;		/* sum, digest_ready */
	struct gw_page_digest sum;
	struct gw_page_digest handler_sum;	/* fault handler thread */
	struct gw_digest digest;	/* the result, after the sweep */
	int digest_err;

	struct gw_pc_faults faults;
	pthread_mutex_t req_lock;	/* link_up, t_link_up_ns, req; held while requests are
					   gathered and sent */
	bool link_up;
	uint64_t t_link_up_ns;

	struct gw_pages_in preempt_in;
	bool preempt_in_ready;
	struct dst_recv recv[MAX_RECV];
	pthread_t handler;
	bool handler_started;
	unsigned nr_threads_up;		/* s->lock: handler and receivers past their set-up */
	pthread_t mapper;
	bool mapper_started;
	bool mapper_stop;		/* atomic */
	int stop_fd;			/* eventfd: the fault handler leaves */
	struct { pid_t tid; int vcpu; } tids[256];	/* fault handler: known threads */
	unsigned nr_tids;
	struct req_batch req[GW_MAX_RAM_BLOCKS];	/* req_lock: requests being gathered */

	uint64_t t_resumed_ns, t_done_ns, t_paused_ns, paused_ns;	/* lock */
	uint32_t recoveries;
};

/* The page's stripe lock (hashing: one per 64-page window modulo NR_STRIPES). */
static inline pthread_mutex_t *pcd_stripe(struct gw_pc_dst *pc, uint64_t page)
{
	return &pc->stripes[(page / 64) % NR_STRIPES];
}

/* ---- dest/postcopy.c ---- */

/* The statistics this side shows (s->lock taken here). */
void pcd_publish(struct gw_pc_dst *pc);

/* The figures of PC_STATS and PC_DONE. */
void pcd_figures(struct gw_pc_dst *pc, struct gw_msg_pc_stats *m);

/* Every page is here: tell the source (again after a recovery if it did not get through). */
void pcd_send_done(struct gw_pc_dst *pc);

/*
 * Verification: the pages precopy wrote that nobody touched since enter
 * the digest now (the rest did as they were placed or first touched).
 */
void pcd_sweep(struct gw_session *s, struct gw_pc_dst *pc);

/* ---- dest/pc_place.c ---- */

/* @nr claimed pages from @page of @block placed (@src: their bytes, NULL: zeros). */
void pcd_placed(struct dst_recv *r, unsigned block, uint64_t page, uint64_t nr, const uint8_t *src);

int pcd_start_receivers(struct gw_pc_dst *pc);
/* A postcopy thread is past its set-up; wait until @nr are. */
void pcd_thread_up(struct gw_pc_dst *pc);
void pcd_wait_threads_up(struct gw_pc_dst *pc, unsigned nr);

void pcd_join_receivers(struct gw_pc_dst *pc);

/* ---- dest/pc_fault.c ---- */

/* Send the gathered requests (req_lock held). */
void pcd_flush_requests(struct gw_pc_dst *pc);

/* The fault handler: lives from PC_PREPARE to the end, across recoveries. */
void *pcd_handler_main(void *arg);

void pcd_stop_handler(struct gw_pc_dst *pc);

void *pcd_mapper_main(void *arg);

void pcd_stop_mapper(struct gw_pc_dst *pc);

/* ---- dest/pc_recover.c ---- */

/*
 * Data connections 0..nr_channels-1 and the preempt one (index
 * nr_channels) as @want_mask says, each once, within the I/O timeout.
 * 0 or -errno with @why.
 */
int pcd_admit_data(struct gw_session *s, uint64_t want_mask, char *why, size_t why_len);

/* The listener of the migration or of a recovery is done with: a recovery may listen on the same address. */
void pcd_stop_listening(struct gw_session *s);

/* Paused until a source reconnects. 0 when running again, or the sticky error. */
int pcd_recover(struct gw_session *s, struct gw_pc_dst *pc);

#endif
