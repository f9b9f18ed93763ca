/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a guest reaches a virtio-mmio device through KVM_EXIT_MMIO and
 * the device's interrupt goes through the in-kernel irqchip. A real-mode
 * guest on a bare VM (KVM_CREATE_IRQCHIP, one 64 KiB memslot) reads the
 * magic and version, negotiates VERSION_1 up to DRIVER_OK, writes a byte of
 * the configuration space (a configuration change: KVM_IRQ_LINE raises GSI
 * 16), reads InterruptStatus, acks it (the line drops) and reads it again;
 * every access is dispatched by kvm_mmio_exit (vmm/kvm/kvm_mmio_dev.c) to
 * the device registered on the VM's bus, none is left unclaimed, and no
 * KVM_IRQ_LINE fails; the in-kernel IOAPIC's request bit follows the line.
 * Skips without /dev/kvm.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "kvm/kvm_internal.h"
#include "kvm/kvm_mmio_dev.h"
#include "drv.h"
#include "kvm_test.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES 0x10000u
#define CODE_GPA 0x1000u
#define DEV_GPA 0x20000u		/* ds = 0x2000 in the guest; outside the memslot */
#define DONE_PORT 0x10

/* Assembled from .code16 (as --32): see the invariant above, one line per access. */
static const uint8_t guest[] = {
	0xb8, 0x00, 0x20,			/* mov $0x2000, %ax */
	0x8e, 0xd8,				/* mov %ax, %ds */
	0x66, 0x8b, 0x1e, 0x00, 0x00,		/* mov 0x0, %ebx: MagicValue */
	0x66, 0x8b, 0x0e, 0x04, 0x00,		/* mov 0x4, %ecx: Version */
	0x66, 0xc7, 0x06, 0x70, 0x00, 0x01, 0x00, 0x00, 0x00,	/* Status = ACKNOWLEDGE */
	0x66, 0xc7, 0x06, 0x70, 0x00, 0x03, 0x00, 0x00, 0x00,	/* Status |= DRIVER */
	0x66, 0xc7, 0x06, 0x24, 0x00, 0x01, 0x00, 0x00, 0x00,	/* DriverFeaturesSel = 1 */
	0x66, 0xc7, 0x06, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00,	/* DriverFeatures = VERSION_1 */
	0x66, 0xc7, 0x06, 0x70, 0x00, 0x0b, 0x00, 0x00, 0x00,	/* Status |= FEATURES_OK */
	0x66, 0xc7, 0x06, 0x70, 0x00, 0x0f, 0x00, 0x00, 0x00,	/* Status |= DRIVER_OK */
	0x66, 0x8b, 0x16, 0x70, 0x00,		/* mov 0x70, %edx: Status */
	0xc6, 0x06, 0x00, 0x01, 0x42,		/* movb $0x42, 0x100: config byte 0 */
	0x66, 0x8b, 0x36, 0x60, 0x00,		/* mov 0x60, %esi: InterruptStatus */
	0x66, 0x89, 0x36, 0x64, 0x00,		/* mov %esi, 0x64: InterruptACK */
	0x66, 0x8b, 0x3e, 0x60, 0x00,		/* mov 0x60, %edi: InterruptStatus */
	0xe6, DONE_PORT,			/* out %al, $0x10 */
};

/* The in-kernel IOAPIC's request register: bit @gsi while its line is asserted. */
static bool ioapic_irr(struct kvm_vm *vm, unsigned gsi)
{
	struct kvm_irqchip chip = { .chip_id = KVM_IRQCHIP_IOAPIC };

	TEST_ASSERT(ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chip) == 0, "KVM_GET_IRQCHIP");
	return chip.chip.ioapic.irr >> gsi & 1;
}

static int vm_setup(struct kvm_vm *vm, uint8_t *ram)
{
	struct kvm_userspace_memory_region slot = {
		.slot = 0, .guest_phys_addr = 0, .memory_size = RAM_BYTES,
		.userspace_addr = (uintptr_t)ram,
	};

	vm->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	TEST_ASSERT(vm->kvm_fd >= 0, "open /dev/kvm");
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	TEST_ASSERT(vm->vm_fd >= 0, "KVM_CREATE_VM");
	TEST_ASSERT(ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000ul) == 0, "KVM_SET_TSS_ADDR");
	TEST_ASSERT(ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) == 0, "KVM_CREATE_IRQCHIP");
	TEST_ASSERT(ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &slot) == 0,
		    "KVM_SET_USER_MEMORY_REGION");
	vm->base.info.size = sizeof(vm->base.info);
	vm->base.info.blocks = vm->base.blocks;
	vm->base.info.nr_blocks = 1;
	vm->base.info.blocks[0] = (struct gw_ram_block){ .name = "ram", .gpa = 0, .host = ram,
						    .size_bytes = RAM_BYTES, .page_size_bytes = 4096 };
	return ioctl(vm->vm_fd, KVM_CREATE_VCPU, 0);
}

static void vcpu_setup(int fd)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rip = CODE_GPA, .rflags = 2 };

	TEST_ASSERT(ioctl(fd, KVM_GET_SREGS, &sregs) == 0, "KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	TEST_ASSERT(ioctl(fd, KVM_SET_SREGS, &sregs) == 0, "KVM_SET_SREGS");
	TEST_ASSERT(ioctl(fd, KVM_SET_REGS, &regs) == 0, "KVM_SET_REGS");
}

/* KVM_RUN until the guest's out to DONE_PORT; returns the MMIO exits seen. */
static unsigned run(struct kvm_vm *vm, int fd, struct kvm_run *r)
{
	unsigned mmio = 0;

	for (unsigned exits = 0; exits < 1000; exits++) {
		TEST_ASSERT(ioctl(fd, KVM_RUN, 0) == 0, "KVM_RUN");
		if (r->exit_reason == KVM_EXIT_IO && r->io.port == DONE_PORT)
			return mmio;
		TEST_ASSERT(r->exit_reason == KVM_EXIT_MMIO, "exit reason %u", r->exit_reason);
		TEST_CHECK(kvm_mmio_exit(vm, r), "MMIO at %#llx unclaimed",
			   (unsigned long long)r->mmio.phys_addr);
		mmio++;
	}
	TEST_ASSERT(0, "the guest never finished");
	return mmio;
}

int main(void)
{
	struct kvm_vm *vm = calloc(1, sizeof(*vm));
	uint8_t *ram = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			    -1, 0);
	static struct virtio_mmio t;
	static struct test_dev dev;
	static struct virtq_mem mem;
	struct kvm_regs regs;
	struct kvm_run *r;
	int fd, run_bytes;
	unsigned mmio;

	kvm_test_require();
	kvm_test_time_bound(120);
	TEST_ASSERT(vm && ram != MAP_FAILED, "memory");
	memcpy(ram + CODE_GPA, guest, sizeof(guest));
	fd = vm_setup(vm, ram);
	TEST_ASSERT(fd >= 0, "KVM_CREATE_VCPU");
	run_bytes = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	r = mmap(NULL, (size_t)run_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	TEST_ASSERT(r != MAP_FAILED, "mmap kvm_run");
	vcpu_setup(fd);
	TEST_ASSERT(kvm_virtio_mem(vm, &mem, NULL, NULL) == 0, "guest RAM for the device");
	dev.reply_bytes = -1;
	TEST_ASSERT(virtio_mmio_init(&t, &test_dev_ops, &dev, "virtio-test0", DEV_GPA,
				     KVM_VIRTIO_MMIO_GSI_BASE, &mem, &kvm_virtio_irq_line, vm) == 0,
		    "transport");
	TEST_ASSERT(kvm_virtio_attach(vm, &t) == 0, "attach");
	mmio = run(vm, fd, r);
	TEST_ASSERT(ioctl(fd, KVM_GET_REGS, &regs) == 0, "KVM_GET_REGS");
	TEST_CHECK(mmio == 13, "%u MMIO exits, 13 expected", mmio);
	TEST_CHECK((uint32_t)regs.rbx == VIRTIO_MMIO_MAGIC, "magic %#llx", regs.rbx);
	TEST_CHECK((uint32_t)regs.rcx == 2, "version %llu", regs.rcx);
	TEST_CHECK((uint32_t)regs.rdx == 0xf, "status %#llx", regs.rdx);
	TEST_CHECK(dev.config[0] == 0x42, "config byte written");
	TEST_CHECK((uint32_t)regs.rsi == VIRTIO_MMIO_INT_CONFIG, "interrupt status %#llx", regs.rsi);
	TEST_CHECK((uint32_t)regs.rdi == 0 && !t.irq_level, "acked: status %#llx, line %d",
		   regs.rdi, t.irq_level);
	TEST_CHECK(!ioapic_irr(vm, KVM_VIRTIO_MMIO_GSI_BASE), "IOAPIC pin low after the ack");
	/* The line itself, host side: the IOAPIC sees it (the pin is masked: nothing delivered). */
	kvm_virtio_irq_line.set_level(vm, KVM_VIRTIO_MMIO_GSI_BASE, true);
	TEST_CHECK(ioapic_irr(vm, KVM_VIRTIO_MMIO_GSI_BASE), "KVM_IRQ_LINE 1: IOAPIC pin requested");
	kvm_virtio_irq_line.set_level(vm, KVM_VIRTIO_MMIO_GSI_BASE, false);
	TEST_CHECK(!ioapic_irr(vm, KVM_VIRTIO_MMIO_GSI_BASE), "KVM_IRQ_LINE 0: pin low");
	TEST_CHECK(kvm_test_log_count("irq_line_failed") == 0, "KVM_IRQ_LINE failed");
	virtio_mmio_destroy(&t);
	TEST_EXIT();
}
