/* SPDX-License-Identifier: MIT */
/*
 * Mutexes shared by a critical-path thread and a background one. With
 * rt-priority the critical threads (fault handler, preempt receiver,
 * postcopy server) run SCHED_FIFO and the background ones (pushers, data
 * receivers) may run niced: a background thread preempted while it holds
 * a lock would make the critical one wait for as long as the guest's vCPUs
 * keep the CPUs (tens of milliseconds measured, postcopy's fault latency
 * tail). Priority inheritance lends the waiter's priority to the holder
 * until it unlocks; an uncontended lock costs what a normal one does.
 */
#ifndef GW_UTIL_PI_MUTEX_H
#define GW_UTIL_PI_MUTEX_H

#include <pthread.h>

/* pthread_mutex_init with PTHREAD_PRIO_INHERIT: 0 or the error number. */
static inline int gw_mutex_init_pi(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int ret = pthread_mutexattr_init(&a);

	if (ret)
		return ret;
	ret = pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	if (!ret)
		ret = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return ret;
}

#endif
