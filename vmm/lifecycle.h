/* SPDX-License-Identifier: MIT */
/*
 * The VM lifecycle both backends share (vmm.h): the engine's pause,
 * resume, save_state and load_state as one state machine, run under the
 * VM's ctl lock, with the backend's hooks for what differs (how vCPUs
 * stop and start, what a state save or load is).
 *
 *   running  --pause-->  paused  --resume-->  running
 *   created, incoming  --resume-->  running (start_first)
 *   postmigrate  --resume-->  -EPERM;  shutdown  --resume-->  -ESHUTDOWN
 *
 * Threads: every function takes *ctl for its whole run; the hooks run
 * with it held. The hooks' vm is the backend's VM.
 */
#ifndef GW_VMM_LIFECYCLE_H
#define GW_VMM_LIFECYCLE_H

#include <pthread.h>
#include <godwit/vm.h>
#include "vmm.h"

struct vmm_life_ops {
	const char *name;				/* "soft", "KVM": in reasons */
	enum vmm_state (*state)(const void *vm);
	void (*set_state)(void *vm, enum vmm_state st);
	void (*join_post_check)(void *vm);		/* a pending post-migration check, joined */
	void (*pause_vcpus)(void *vm);			/* state running: every vCPU stopped on return */
	void (*resume_vcpus)(void *vm);			/* state paused */
	int (*start_first)(void *vm);			/* state created or incoming; 0 or -errno */
	int (*save_state)(void *vm, struct gw_state *st);	/* not running; 0 or -errno */
	/*
	 * Optional: why an incoming VM is still not ready to load (NULL: it
	 * is; else a note for the reason, "" for none). Also asked, for its
	 * note, when the VM is not incoming.
	 */
	const char *(*load_busy)(const void *vm);
	int (*load_state)(void *vm, struct gw_state *st);	/* incoming; 0 or -errno */
};

struct vmm_life {
	const struct vmm_life_ops *ops;
	void *vm;
	pthread_mutex_t *ctl;
};

/* Running: stop every vCPU. Always 0. */
int vmm_life_pause(const struct vmm_life *l);
/* Paused: restart; created or incoming: first start. 0, -EPERM (postmigrate), -ESHUTDOWN, or the hook's error. */
int vmm_life_resume(const struct vmm_life *l);
/* -EBUSY while running (the engine pauses first), or the hook's result. */
int vmm_life_save_state(const struct vmm_life *l, struct gw_state *st);
/* -EBUSY (gw_state_reject) unless incoming and ready, or the hook's result. */
int vmm_life_load_state(const struct vmm_life *l, struct gw_state *st);

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
