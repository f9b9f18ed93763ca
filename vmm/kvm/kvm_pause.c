/* SPDX-License-Identifier: MIT */
/* The pause/kick/acknowledge handshake (kvm_pause.h). */
#include <errno.h>
#include <time.h>
#include "kvm/kvm_pause.h"

uint64_t kvm_pause_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int kvm_pause_init(struct kvm_pause *p, kvm_kick_fn kick, void *opaque)
{
	pthread_condattr_t ca;
	int ret;

	ret = pthread_condattr_init(&ca);
	if (ret)
		return -ret;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	ret = pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (ret)
		return -ret;
	ret = pthread_mutex_init(&p->lock, NULL);
	if (ret) {
		pthread_cond_destroy(&p->cond);
		return -ret;
	}
	atomic_init(&p->requested, false);
	atomic_init(&p->stop, false);
	p->nr_vcpus = 0;
	p->nr_members = 0;
	p->nr_parked = 0;
	p->nr_acked = 0;
	p->epoch = 0;
	p->nr_pauses = 0;
	p->kick = kick;
	p->kick_opaque = opaque;
	p->job = NULL;
	p->job_opaque = NULL;
	p->job_items = p->job_next = p->job_done = 0;
	return 0;
}

void kvm_pause_destroy(struct kvm_pause *p)
{
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
}

void kvm_pause_set_vcpus(struct kvm_pause *p, unsigned nr_vcpus)
{
	pthread_mutex_lock(&p->lock);
	p->nr_vcpus = nr_vcpus;
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_join(struct kvm_pause *p)
{
	pthread_mutex_lock(&p->lock);
	p->nr_members++;
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_leave(struct kvm_pause *p)
{
	pthread_mutex_lock(&p->lock);
	p->nr_members--;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* lock held: run the job's items while any is left (dropping the lock for each). */
static void job_work(struct kvm_pause *p)
{
	while (p->job && p->job_next < p->job_items) {
		kvm_job_fn fn = p->job;
		void *opaque = p->job_opaque;
		unsigned item = p->job_next++;

		pthread_mutex_unlock(&p->lock);
		fn(opaque, item);
		pthread_mutex_lock(&p->lock);
		if (++p->job_done == p->job_items)
			pthread_cond_broadcast(&p->cond);	/* the controller */
	}
}

bool kvm_pause_point(struct kvm_pause *p, bool *parked)
{
	bool stop;

	*parked = false;
	pthread_mutex_lock(&p->lock);
	if (atomic_load(&p->requested) && !atomic_load(&p->stop)) {
		uint64_t epoch = p->epoch;

		*parked = true;
		p->nr_parked++;
		p->nr_acked++;
		pthread_cond_broadcast(&p->cond);
		while (p->epoch == epoch && !atomic_load(&p->stop)) {
			job_work(p);
			if (p->epoch == epoch && !atomic_load(&p->stop))
				pthread_cond_wait(&p->cond, &p->lock);
		}
		p->nr_parked--;
	}
	stop = atomic_load(&p->stop);
	pthread_mutex_unlock(&p->lock);
	return stop;
}

void kvm_pause_sleep_until(struct kvm_pause *p, uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ull),
		.tv_nsec = (long)(deadline_ns % 1000000000ull),
	};

	pthread_mutex_lock(&p->lock);
	while (!atomic_load(&p->requested) && !atomic_load(&p->stop) &&
	       kvm_pause_now_ns() < deadline_ns) {
		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_all(struct kvm_pause *p)
{
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->requested, true);
	p->nr_acked = 0;
	pthread_cond_broadcast(&p->cond);
	for (unsigned i = 0; i < p->nr_vcpus; i++)
		p->kick(p->kick_opaque, i);
	while (p->nr_acked < p->nr_members)
		pthread_cond_wait(&p->cond, &p->lock);
	p->nr_pauses++;
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_hold(struct kvm_pause *p)
{
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->requested, true);
	p->nr_acked = 0;
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_run_parked(struct kvm_pause *p, kvm_job_fn fn, void *opaque, unsigned nr_items)
{
	pthread_mutex_lock(&p->lock);
	p->job = fn;
	p->job_opaque = opaque;
	p->job_items = nr_items;
	p->job_next = p->job_done = 0;
	if (p->nr_parked)
		pthread_cond_broadcast(&p->cond);
	job_work(p);
	while (p->job_done < p->job_items)
		pthread_cond_wait(&p->cond, &p->lock);
	p->job = NULL;
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_resume_all(struct kvm_pause *p)
{
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->requested, false);
	p->epoch++;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void kvm_pause_stop_all(struct kvm_pause *p)
{
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->stop, true);
	atomic_store(&p->requested, true);
	pthread_cond_broadcast(&p->cond);
	for (unsigned i = 0; i < p->nr_vcpus; i++)
		p->kick(p->kick_opaque, i);
	pthread_mutex_unlock(&p->lock);
}
