/* SPDX-License-Identifier: MIT */
/*
 * Devices of the KVM VM: KVM_EXIT_MMIO dispatch to the regions registered
 * on vm->mmio (vmm/dev/mmio_bus.h), interrupt lines of the in-kernel
 * irqchip (KVM_CREATE_IRQCHIP is always made here: kvm_sys.c), and guest
 * RAM as a device sees it (vmm/dev/virtq.h). docs/devices.md.
 */
#ifndef GW_KVM_MMIO_DEV_H
#define GW_KVM_MMIO_DEV_H

#include <stdbool.h>
#include <linux/kvm.h>
#include "dev/virtio_mmio.h"
#include "guest_abi.h"

struct kvm_vm;

/*
 * Where virtio-mmio devices go: one page each from this guest-physical
 * address (below 4 GiB, above the "sys" block, outside every memslot, so
 * that accesses exit), and GSIs from 16 (IOAPIC pins with KVM's default
 * routing, none of them the ISA lines the PIT and COM1 use). The guests
 * learn both from the boot info (guest_abi.h).
 */
#define KVM_VIRTIO_MMIO_BASE_GPA	GW_GUEST_DEV_GPA
#define KVM_VIRTIO_MMIO_GSI_BASE	GW_GUEST_DEV_GSI_BASE
#define KVM_VIRTIO_MMIO_MAX		8u

/* A KVM_EXIT_MMIO of a vCPU: true when a registered region took it. vCPU thread. */
bool kvm_mmio_exit(struct kvm_vm *vm, struct kvm_run *run);
/*
 * The in-kernel irqchip's lines through KVM_IRQ_LINE (level-triggered:
 * asserted while the device's interrupt status is non-zero). The opaque is
 * the struct kvm_vm. Any thread.
 */
extern const struct virtio_irq_ops kvm_virtio_irq_line;
/* Guest RAM of @vm (every block) into @m, with @mark_dirty as its hook. 0 or -errno. */
int kvm_virtio_mem(const struct kvm_vm *vm, struct virtq_mem *m,
		   void (*mark_dirty)(void *opaque, uint64_t gpa, uint64_t len_bytes), void *opaque);
/* Register @t's register page on @vm's bus (creation, before vCPUs run). 0 or -errno. */
int kvm_virtio_attach(struct kvm_vm *vm, struct virtio_mmio *t);

#endif
