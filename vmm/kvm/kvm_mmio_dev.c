/* SPDX-License-Identifier: MIT */
/* KVM_EXIT_MMIO dispatch, KVM_IRQ_LINE, guest RAM for devices (kvm_mmio_dev.h). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/ioctl.h>
#include <godwit/log.h>
#include "kvm/kvm_internal.h"
#include "kvm/kvm_mmio_dev.h"

bool kvm_mmio_exit(struct kvm_vm *vm, struct kvm_run *run)
{
	uint32_t len = run->mmio.len;

	if (len == 0 || len > sizeof(run->mmio.data))
		return false;
	return vmm_mmio_access(&vm->base.mmio, run->mmio.phys_addr, run->mmio.data, len,
			       run->mmio.is_write);
}

static void irq_line(void *opaque, uint32_t gsi, bool level)
{
	struct kvm_vm *vm = opaque;
	struct kvm_irq_level irq = { .irq = gsi, .level = level };

	/* Fails only with a bad GSI or no irqchip: both are set-up bugs, logged. */
	if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &irq) < 0)
		gw_log(GW_LOG_ERROR, "kvm", "irq_line_failed", "gsi=%u level=%d err=%d", gsi,
		       level, errno);
}

const struct virtio_irq_ops kvm_virtio_irq_line = {
	.name = "kvm-irq-line",
	.set_level = irq_line,
};

int kvm_virtio_mem(const struct kvm_vm *vm, struct virtq_mem *m,
		   void (*mark_dirty)(void *opaque, uint64_t gpa, uint64_t len_bytes), void *opaque)
{
	memset(m, 0, sizeof(*m));
	for (unsigned i = 0; i < vm->base.info.nr_blocks; i++) {
		const struct gw_ram_block *b = &vm->base.info.blocks[i];
		int ret = virtq_mem_add(m, b->gpa, b->host, b->size_bytes);

		if (ret)
			return ret;
	}
	m->mark_dirty = mark_dirty;
	m->dirty_opaque = opaque;
	return 0;
}

int kvm_virtio_attach(struct kvm_vm *vm, struct virtio_mmio *t)
{
	return vmm_mmio_register(&vm->base.mmio, t->base_gpa, VIRTIO_MMIO_REGION_BYTES,
				 virtio_mmio_access, t);
}
