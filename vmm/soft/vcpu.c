/* SPDX-License-Identifier: MIT */
/*
 * Soft vCPU threads and the pause handshake.
 *
 * Pause sets pause_req and waits until every vCPU thread has parked in
 * soft_vcpu_checkpoint() (so its last writes happen-before the return of
 * pause); resume clears it and wakes them. Stop sets stop_req, wakes them
 * and joins them. The throttle makes each thread sleep a share of its time
 * at its checkpoints.
 *
 * Threads: start, pause, resume and stop run under the VM's ctl (one
 * control thread at a time); the vCPU threads and the control thread meet
 * only through the handshake fields, under lock (soft_internal.h).
 */
#include <errno.h>
#include <time.h>
#include <godwit/log.h>
#include "soft/soft_internal.h"

#define THROTTLE_MAX_SLEEP_NS 100000000ull

/* Sleep pct% of the time: work_ns * pct / (100 - pct) after each stretch of work. */
static void throttle(struct soft_vcpu *v, unsigned pct)
{
	uint64_t now = gw_now_ns();
	uint64_t work_ns = v->throttle_mark_ns && now > v->throttle_mark_ns ?
			   now - v->throttle_mark_ns : 0;
	uint64_t sleep_ns = work_ns * pct / (100 - pct);

	if (sleep_ns > THROTTLE_MAX_SLEEP_NS)
		sleep_ns = THROTTLE_MAX_SLEEP_NS;
	if (sleep_ns) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)sleep_ns };

		nanosleep(&ts, NULL);
	}
	v->throttle_mark_ns = gw_now_ns();
}

bool soft_vcpu_checkpoint(struct soft_vcpu *v, bool *was_parked)
{
	struct soft_vm *vm = v->vm;
	unsigned pct = atomic_load_explicit(&vm->throttle_pct, memory_order_relaxed);
	bool stop;

	*was_parked = false;
	if (atomic_load_explicit(&vm->stop_req, memory_order_acquire))
		return true;
	if (pct)
		throttle(v, pct);
	if (!atomic_load_explicit(&vm->pause_req, memory_order_acquire))
		return false;

	pthread_mutex_lock(&vm->lock);
	vm->nr_parked++;
	pthread_cond_broadcast(&vm->cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->stop_req))
		pthread_cond_wait(&vm->cond, &vm->lock);
	vm->nr_parked--;
	stop = atomic_load(&vm->stop_req);
	pthread_mutex_unlock(&vm->lock);
	v->throttle_mark_ns = 0;
	*was_parked = true;
	return stop;
}

int soft_vcpus_start(struct soft_vm *vm, void *(*body)(void *vcpu))
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->pause_req, false);
	atomic_store(&vm->stop_req, false);
	pthread_mutex_unlock(&vm->lock);
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		int ret = pthread_create(&v->thread, NULL, body, v);

		if (ret) {
			soft_vcpus_stop(vm);	/* the ones started */
			return -ret;
		}
		v->thread_started = true;
		pthread_mutex_lock(&vm->lock);
		vm->nr_threads++;
		pthread_mutex_unlock(&vm->lock);
	}
	return 0;
}

void soft_vcpus_pause(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->pause_req, true);
	while (vm->nr_parked < vm->nr_threads)
		pthread_cond_wait(&vm->cond, &vm->lock);
	pthread_mutex_unlock(&vm->lock);
}

void soft_vcpus_resume(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->pause_req, false);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

void soft_vcpus_stop(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->stop_req, true);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if (vm->vcpus[i].thread_started)
			pthread_join(vm->vcpus[i].thread, NULL);
		vm->vcpus[i].thread_started = false;
	}
	pthread_mutex_lock(&vm->lock);
	vm->nr_threads = 0;
	vm->nr_parked = 0;
	pthread_mutex_unlock(&vm->lock);
}

int soft_vcpus_throttle(struct soft_vm *vm, unsigned pct)
{
	if (pct > 99)
		return -EINVAL;
	atomic_store(&vm->throttle_pct, pct);
	return 0;
}
