/* SPDX-License-Identifier: MIT */
/*
 * The VM lifecycle both backends share (lifecycle.h). Threads: each
 * function holds the VM's ctl for its whole run.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include "lifecycle.h"

int vmm_life_pause(const struct vmm_life *l)
{
	pthread_mutex_lock(l->ctl);
	l->ops->join_post_check(l->vm);
	if (l->ops->state(l->vm) == VMM_RUNNING) {
		l->ops->pause_vcpus(l->vm);
		l->ops->set_state(l->vm, VMM_PAUSED);
	}
	pthread_mutex_unlock(l->ctl);
	return 0;
}

int vmm_life_resume(const struct vmm_life *l)
{
	int ret = 0;

	pthread_mutex_lock(l->ctl);
	switch (l->ops->state(l->vm)) {
	case VMM_PAUSED:
		l->ops->resume_vcpus(l->vm);
		l->ops->set_state(l->vm, VMM_RUNNING);
		break;
	case VMM_CREATED:
	case VMM_INCOMING:
		ret = l->ops->start_first(l->vm);
		break;
	case VMM_RUNNING:
		break;
	case VMM_POSTMIGRATE:
		ret = -EPERM;		/* the VM lives on the destination now */
		break;
	default:
		ret = -ESHUTDOWN;
		break;
	}
	pthread_mutex_unlock(l->ctl);
	return ret;
}

int vmm_life_save_state(const struct vmm_life *l, struct gw_state *st)
{
	int ret;

	pthread_mutex_lock(l->ctl);
	if (l->ops->state(l->vm) == VMM_RUNNING)
		ret = -EBUSY;		/* the engine pauses first */
	else
		ret = l->ops->save_state(l->vm, st);
	pthread_mutex_unlock(l->ctl);
	return ret;
}

int vmm_life_load_state(const struct vmm_life *l, struct gw_state *st)
{
	enum vmm_state s;
	const char *busy;
	int ret;

	pthread_mutex_lock(l->ctl);
	s = l->ops->state(l->vm);
	busy = l->ops->load_busy ? l->ops->load_busy(l->vm) : NULL;
	if (s != VMM_INCOMING || busy)
		ret = gw_state_reject(st, -EBUSY, "%s VM is %s%s, not waiting for a migration",
				      l->ops->name, vmm_state_name(s), busy ? busy : "");
	else
		ret = l->ops->load_state(l->vm, st);
	pthread_mutex_unlock(l->ctl);
	return ret;
}

void vmm_thread_attr_normal(pthread_attr_t *attr)
{
	pthread_attr_init(attr);
	pthread_attr_setinheritsched(attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(attr, SCHED_OTHER);
	pthread_attr_setschedparam(attr, &(struct sched_param){ .sched_priority = 0 });
}

int vmm_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int ret;

	vmm_thread_attr_normal(&attr);
	ret = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

void vmm_thread_name(pthread_t t, const char *fmt, ...)
{
	char name[16];	/* TASK_COMM_LEN */
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	(void)pthread_setname_np(t, name);
}
