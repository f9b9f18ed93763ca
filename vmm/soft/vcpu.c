/* SPDX-License-Identifier: MIT */
/*
 * Soft vCPU threads: the pause handshake, and what slows them down.
 *
 * Pause sets pause_req and waits until every vCPU thread has parked in
 * soft_vcpu_checkpoint() (so its last writes happen-before the return of
 * pause); resume clears it and wakes them. Stop sets stop_req, wakes them
 * and joins them. Every sleep of a vCPU (idle tick, rate pacing, throttle,
 * dirty limit) is a timed wait on the VM's condition variable that a pause
 * or a stop cuts short: a paused guest stops within microseconds, not at
 * the end of a sleep.
 *
 * Throttle (auto-converge): in each 10 ms slice a vCPU runs (100 - pct)%
 * of the time and sleeps the rest. Dirty limit: each vCPU holds a bucket of
 * tokens (bytes it may dirty) refilled at the limit's rate, at most 10 ms
 * worth; a page written takes a page's worth, and a vCPU with an empty
 * bucket sleeps until the refill covers it.
 *
 * Threads: start, pause, resume and stop run under the VM's ctl (one
 * control thread at a time); the vCPU threads and the control thread meet
 * only through the handshake fields, under lock (soft_internal.h).
 */
#include <errno.h>
#include <time.h>
#include <godwit/log.h>
#include "thread.h"
#include "soft/soft_internal.h"

#define THROTTLE_SLICE_NS 10000000ull

bool soft_vcpu_sleep(struct soft_vcpu *v, uint64_t ns)
{
	struct soft_vm *vm = v->vm;
	uint64_t end = gw_now_ns() + ns;
	struct timespec ts = { .tv_sec = (time_t)(end / 1000000000ull),
			       .tv_nsec = (long)(end % 1000000000ull) };
	bool cut = false;

	pthread_mutex_lock(&vm->base.lock);
	while (!(cut = atomic_load(&vm->pause_req) || atomic_load(&vm->stop_req)) &&
	       pthread_cond_timedwait(&vm->cond, &vm->base.lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&vm->base.lock);
	return cut;
}

/* Run (100 - pct)% of each 10 ms slice, sleep the rest. True when it slept. */
static bool throttle(struct soft_vcpu *v, unsigned pct)
{
	uint64_t now = gw_now_ns(), run_ns = THROTTLE_SLICE_NS * (100 - pct) / 100;

	if (!v->slice_start_ns || now - v->slice_start_ns >= THROTTLE_SLICE_NS) {
		v->slice_start_ns = now;	/* a new slice (or the first) */
		return false;
	}
	if (now - v->slice_start_ns < run_ns)
		return false;
	soft_vcpu_sleep(v, v->slice_start_ns + THROTTLE_SLICE_NS - now);
	v->slice_start_ns = gw_now_ns();
	return true;
}

void soft_vcpu_dirtied(struct soft_vcpu *v, unsigned pages)
{
	uint64_t bps = atomic_load_explicit(&v->vm->base.dirty_limit_bps, memory_order_relaxed);
	uint64_t wait_ns;

	if (vmm_dirty_bucket_take(&v->bucket, bps, gw_now_ns(), (uint64_t)pages * SOFT_PAGE_BYTES,
				  SOFT_PAGE_BYTES, &wait_ns) &&
	    !soft_vcpu_sleep(v, wait_ns))
		vmm_dirty_bucket_slept(&v->bucket, gw_now_ns());
}

bool soft_vcpu_checkpoint(struct soft_vcpu *v, bool *slept)
{
	struct soft_vm *vm = v->vm;
	unsigned pct = atomic_load_explicit(&vm->base.throttle_pct, memory_order_relaxed);
	bool stop;

	*slept = false;
	if (atomic_load_explicit(&vm->stop_req, memory_order_acquire))
		return true;
	if (pct)
		*slept = throttle(v, pct);
	soft_run_hint_duty(v);
	if (!atomic_load_explicit(&vm->pause_req, memory_order_acquire))
		return false;

	pthread_mutex_lock(&vm->base.lock);
	vm->nr_parked++;
	pthread_cond_broadcast(&vm->cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->stop_req))
		pthread_cond_wait(&vm->cond, &vm->base.lock);
	vm->nr_parked--;
	stop = atomic_load(&vm->stop_req);
	pthread_mutex_unlock(&vm->base.lock);
	v->slice_start_ns = 0;
	v->bucket.tokens_ns = 0;
	*slept = true;
	return stop;
}

int soft_vcpus_start(struct soft_vm *vm, void *(*body)(void *vcpu))
{
	pthread_mutex_lock(&vm->base.lock);
	atomic_store(&vm->pause_req, false);
	atomic_store(&vm->stop_req, false);
	pthread_mutex_unlock(&vm->base.lock);
	for (unsigned i = 0; i < vm->base.nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		int ret = vmm_thread_start(&v->thread, body, v);

		if (ret) {
			soft_vcpus_stop(vm);	/* the ones started */
			return -ret;
		}
		vmm_thread_name(v->thread, "vcpu%u", i);
		v->thread_started = true;
		pthread_mutex_lock(&vm->base.lock);
		vm->nr_threads++;
		pthread_mutex_unlock(&vm->base.lock);
	}
	return 0;
}

void soft_vcpus_pause(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->base.lock);
	atomic_store(&vm->pause_req, true);
	pthread_cond_broadcast(&vm->cond);	/* cuts every sleep short */
	while (vm->nr_parked < vm->nr_threads)
		pthread_cond_wait(&vm->cond, &vm->base.lock);
	pthread_mutex_unlock(&vm->base.lock);
}

void soft_vcpus_resume(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->base.lock);
	atomic_store(&vm->pause_req, false);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->base.lock);
}

void soft_vcpus_stop(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->base.lock);
	atomic_store(&vm->stop_req, true);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->base.lock);
	for (unsigned i = 0; i < vm->base.nr_vcpus; i++) {
		if (vm->vcpus[i].thread_started)
			pthread_join(vm->vcpus[i].thread, NULL);
		vm->vcpus[i].thread_started = false;
	}
	pthread_mutex_lock(&vm->base.lock);
	vm->nr_threads = 0;
	vm->nr_parked = 0;
	pthread_mutex_unlock(&vm->base.lock);
}
