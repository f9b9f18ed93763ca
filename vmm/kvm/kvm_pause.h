/* SPDX-License-Identifier: MIT */
/*
 * Pause, kick, acknowledge, resume: the handshake between one controller
 * (the thread that calls pause/resume, serialized by its caller) and the
 * vCPU threads. Independent of KVM (the unit tests drive it with stand-in
 * vCPU threads); the KVM side supplies the kick.
 *
 * Controller, kvm_pause_all():
 *   1. requested = true (under lock), wake sleepers (cond broadcast);
 *   2. kick every vCPU: kick(opaque, i). For KVM: a signal whose handler
 *      sets kvm_run->immediate_exit, so KVM_RUN returns -EINTR whether the
 *      signal lands before or during KVM_RUN;
 *   3. wait until every member thread has acknowledged *this* pause
 *      (nr_acked, reset in step 1): none runs guest code. Counting threads
 *      merely parked would be wrong: right after a resume, a thread of the
 *      previous pause may still be asleep, not yet woken; it will leave,
 *      see the new request and acknowledge it.
 * vCPU thread: before each KVM_RUN it sets immediate_exit to 1 when
 *   `requested` (so that last run completes a pending I/O exit without
 *   entering the guest: the state it leaves is complete), never to 0 there
 *   (that could erase a kick's 1); when KVM_RUN returns -EINTR it calls
 *   kvm_pause_point(), which counts it parked and sleeps until the resume
 *   (or stop); after a park it clears immediate_exit.
 * Resume, kvm_pause_resume_all(): requested = false, bump `epoch`, wake
 *   all; parked threads leave once they see the new epoch.
 * A vCPU thread that ends (error, stop) leaves the membership, so a pause
 * never waits for a thread that is gone.
 * Jobs, kvm_pause_run_parked(): while every member is parked the controller
 *   hands out items of a job (one per vCPU: its state saved or loaded);
 *   parked threads take items as they wake, the controller takes them too,
 *   and it returns once every item is done. On two cores the state of four
 *   vCPUs, some 0.1 ms of ioctls each inside the downtime, is then done two
 *   at a time, by threads that exist already.
 *
 * Why it is safe: a thread parks only after its KVM_RUN returned, and the
 * controller returns only once all members parked; the mutex orders the
 * thread's last guest writes (visible to KVM) before the controller's return.
 *
 * Threads: every field below is guarded by `lock` except `requested` and
 * `stop`, which are written under `lock` and read lock-free by the vCPU
 * threads (atomics); kick and its opaque are set at init.
 */
#ifndef GW_KVM_PAUSE_H
#define GW_KVM_PAUSE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef void (*kvm_kick_fn)(void *opaque, unsigned vcpu);
typedef void (*kvm_job_fn)(void *opaque, unsigned item);

struct kvm_pause {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* parks, acks, resumes, stop */
	atomic_bool requested;		/* a pause is asked or in force */
	atomic_bool stop;		/* threads must end */
	unsigned nr_vcpus;		/* lock: indices kicked, 0..nr_vcpus-1 */
	unsigned nr_members;		/* lock: threads taking part */
	unsigned nr_parked;		/* lock: members parked in kvm_pause_point */
	unsigned nr_acked;		/* lock: members that parked since this pause began */
	uint64_t epoch;			/* lock: bumped by every resume */
	uint64_t nr_pauses;		/* lock: completed kvm_pause_all calls */
	kvm_kick_fn kick;		/* set at init */
	void *kick_opaque;		/* set at init */
	kvm_job_fn job;			/* lock: the job of kvm_pause_run_parked, NULL: none */
	void *job_opaque;		/* lock */
	unsigned job_items, job_next, job_done;	/* lock: items, next to take, finished */
};

int kvm_pause_init(struct kvm_pause *p, kvm_kick_fn kick, void *opaque);
void kvm_pause_destroy(struct kvm_pause *p);
/* Indices to kick (vCPUs that exist). */
void kvm_pause_set_vcpus(struct kvm_pause *p, unsigned nr_vcpus);

/* vCPU thread: join at start, leave at exit (wakes a waiting controller). */
void kvm_pause_join(struct kvm_pause *p);
void kvm_pause_leave(struct kvm_pause *p);
/* vCPU thread, lock-free: is a pause (or stop) asked? */
static inline bool kvm_pause_requested(struct kvm_pause *p)
{
	return atomic_load_explicit(&p->requested, memory_order_acquire);
}
static inline bool kvm_pause_stopping(struct kvm_pause *p)
{
	return atomic_load_explicit(&p->stop, memory_order_acquire);
}
/*
 * vCPU thread, out of KVM_RUN: park while a pause is in force; *@parked
 * tells whether it did. Returns true when the thread must end (stop),
 * false to go on running. Kicks for a pause are all sent before its resume
 * wakes the parked thread, and a woken thread runs its signal handlers
 * before its own code: after a park, no kick of that pause is in flight, so
 * the caller may clear immediate_exit then (and only then).
 */
bool kvm_pause_point(struct kvm_pause *p, bool *parked);
/*
 * vCPU thread: sleep until CLOCK_MONOTONIC @deadline_ns, or less when a
 * pause or stop is asked (pacing, waiting for a dirty-ring reset).
 */
void kvm_pause_sleep_until(struct kvm_pause *p, uint64_t deadline_ns);

/* Controller: returns once every member is parked. */
void kvm_pause_all(struct kvm_pause *p);
/*
 * Controller: a pause in force before any thread exists, nothing to kick
 * or wait for. Threads started then park at their start (vcpu_main) until
 * kvm_pause_resume_all: the destination's vCPU threads, made ahead.
 */
void kvm_pause_hold(struct kvm_pause *p);
/*
 * Controller, every member parked (a pause in force, or held before the
 * first resume): @fn(@opaque, i) for i in 0..@nr_items-1, each once, on
 * this thread or a parked one; returns when all are done. @fn must not
 * pause, resume or start a job.
 */
void kvm_pause_run_parked(struct kvm_pause *p, kvm_job_fn fn, void *opaque, unsigned nr_items);
/* Controller: let parked members run again. */
void kvm_pause_resume_all(struct kvm_pause *p);
/* Controller: ask every thread to end (kicks them); they leave on their own. */
void kvm_pause_stop_all(struct kvm_pause *p);

uint64_t kvm_pause_now_ns(void);

#endif
