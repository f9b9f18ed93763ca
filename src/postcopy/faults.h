/* SPDX-License-Identifier: MIT */
/*
 * The destination's account of postcopy faults: who waits for which page
 * since when, and what it cost (pure bookkeeping: no I/O, no clock; times
 * are given by the caller, from the fault handler's side: when it read the
 * fault, and when the page was placed).
 *
 *   postcopy-blocktime        time during which every vCPU waited at once
 *                             (QEMU's definition)
 *   postcopy-vcpu-blocktime   per vCPU, time spent waiting in a fault
 *   fault latency             fault read -> page placed, for faults that
 *                             waited for the network: p50, p99, max from a
 *                             log-linear histogram (1 us steps up to 1 ms,
 *                             then 64 steps per power of two)
 *   local faults              resolved at once (the page was there)
 *
 * A thread waits on one page at a time; faults of threads that are not
 * vCPUs (vcpu < 0) count in the latency but not in the blocktimes.
 *
 * Threads: every function takes f->lock (the fault handler adds waiters,
 * the placing threads complete them, the statistics read them).
 */
#ifndef GW_POSTCOPY_FAULT_H
#define GW_POSTCOPY_FAULT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "wire/msg.h"

#define GW_PC_MAX_WAITERS 1024
#define GW_PC_MAX_VCPUS GW_WIRE_MAX_VCPUS
#define GW_PC_HIST_LINEAR 1024u		/* 1 us buckets below this */
#define GW_PC_HIST_SUB 64u		/* buckets per power of two above */
#define GW_PC_HIST_BUCKETS (GW_PC_HIST_LINEAR + 40u * GW_PC_HIST_SUB)

struct gw_pc_waiter {
	bool used;
	int vcpu;			/* -1: not a vCPU */
	unsigned block;
	uint64_t page;
	uint64_t t_ns;			/* fault read */
};

struct gw_pc_faults {
	pthread_mutex_t lock;
	unsigned nr_vcpus;		/* set at init */
	struct gw_pc_waiter w[GW_PC_MAX_WAITERS];
	unsigned nr_waiting;		/* lock for writers (atomic stores); read atomically, unlocked, as a hint */
	uint64_t vcpu_since_ns[GW_PC_MAX_VCPUS];	/* 0: not waiting */
	uint64_t vcpu_blocktime_ns[GW_PC_MAX_VCPUS];
	unsigned vcpus_blocked;
	uint64_t all_since_ns, all_blocked_ns;
	uint64_t hist[GW_PC_HIST_BUCKETS];
	uint64_t samples, lat_max_ns;
	uint64_t faults, local_faults;
	uint64_t oldest_hint_ns;	/* a lower bound of the oldest waiter's t_ns, 0 = none */
};

void gw_pc_faults_init(struct gw_pc_faults *f, unsigned nr_vcpus);
/* The vCPU count, once the VM is known (at GO; other threads may be in the table). */
void gw_pc_faults_set_vcpus(struct gw_pc_faults *f, unsigned nr_vcpus);
void gw_pc_faults_destroy(struct gw_pc_faults *f);
/* A fault resolved at once, read at @t0_ns, resolved at @t1_ns. */
void gw_pc_faults_local(struct gw_pc_faults *f, int vcpu, uint64_t t0_ns, uint64_t t1_ns);
/* A fault that waits for @page of @block (read at @t_ns). False when the table is full (not counted). */
bool gw_pc_faults_wait(struct gw_pc_faults *f, int vcpu, unsigned block, uint64_t page, uint64_t t_ns);
/* Pages [@page, @page + @nr) of @block placed at @t_ns: their waiters are done. Returns how many. */
unsigned gw_pc_faults_placed(struct gw_pc_faults *f, unsigned block, uint64_t page, uint64_t nr,
			     uint64_t t_ns);
/* Whether a thread still waits for @page of @block (the fault handler's re-check). */
bool gw_pc_faults_waiting(struct gw_pc_faults *f, unsigned block, uint64_t page);
/* The time the oldest waiter has waited at @now_ns, 0 when none waits. */
uint64_t gw_pc_faults_oldest_ns(struct gw_pc_faults *f, uint64_t now_ns);
/* The figures at @now_ns (blocktimes include the waits still running) into the PC_STATS fields. */
void gw_pc_faults_figures(struct gw_pc_faults *f, uint64_t now_ns, struct gw_msg_pc_stats *out);

/* Histogram arithmetic, exposed for tests: bucket of a latency, and a bucket's lower bound. */
unsigned gw_pc_hist_bucket(uint64_t us);
uint64_t gw_pc_hist_value(unsigned bucket);

#endif
