/* SPDX-License-Identifier: MIT */
/*
 * The threads the VMM makes (vCPUs, a post-migration check, fill and
 * prealloc helpers): started with normal scheduling, named for top -H.
 */
#ifndef GW_VMM_THREAD_H
#define GW_VMM_THREAD_H

#include <pthread.h>

/*
 * Thread attributes for a VM's threads (vCPUs, a post-migration check):
 * SCHED_OTHER whatever the creator runs. The engine calls resume from a
 * SCHED_FIFO thread when rt-priority is set (gw_vm_ops.resume), and a guest
 * or a check spinning at real-time priority would starve the host. Destroy
 * with pthread_attr_destroy.
 */
void vmm_thread_attr_normal(pthread_attr_t *attr);
/* pthread_create with those attributes: 0 or the error number. */
int vmm_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/*
 * Name thread @t for top -H, perf and gdb ("vcpu0", "vm-fill1"): at most
 * 15 characters are kept. Best effort, called by the creator.
 */
__attribute__((format(printf, 2, 3)))
void vmm_thread_name(pthread_t t, const char *fmt, ...);

#endif
