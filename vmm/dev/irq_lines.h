/* SPDX-License-Identifier: MIT */
/*
 * Interrupt lines for a VMM without an interrupt controller (the soft VM):
 * 32 level-triggered lines a device drives through virtio_irq_ops, and a
 * "halt until an interrupt" for the vCPU thread that takes them. The KVM
 * VMM uses the in-kernel irqchip instead (vmm/kvm/kvm_mmio_dev.h).
 *
 * Threads: any thread drives a line (a device under its transport's lock),
 * vCPU threads poll or wait; everything below `lock` is guarded by it.
 */
#ifndef GW_VMM_IRQ_LINES_H
#define GW_VMM_IRQ_LINES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "dev/virtio_mmio.h"

#define VMM_IRQ_LINES 32u

struct vmm_irq_lines {
	pthread_mutex_t lock;
	pthread_cond_t raised;		/* signalled when a line goes high */
	/* lock: */
	uint32_t level;			/* bit i: line i asserted */
	uint64_t raises;		/* low-to-high transitions, all lines */
};

/* 0 or -errno. */
int vmm_irq_lines_init(struct vmm_irq_lines *l);
void vmm_irq_lines_destroy(struct vmm_irq_lines *l);
/* The line levels now (a snapshot). */
uint32_t vmm_irq_lines_level(struct vmm_irq_lines *l);
/*
 * Wait until a line of @mask is asserted or @timeout_ns passes (0: do not
 * wait). Returns the asserted lines of @mask (0 on timeout).
 */
uint32_t vmm_irq_lines_wait(struct vmm_irq_lines *l, uint32_t mask, uint64_t timeout_ns);
/* Wake every waiter without a line (a pause); they return 0 or what is asserted. */
void vmm_irq_lines_kick(struct vmm_irq_lines *l);

/* virtio_irq_ops over these lines: the opaque is the struct vmm_irq_lines. */
extern const struct virtio_irq_ops vmm_irq_lines_ops;

#endif
