/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a KVM VM built by the VMM starts its vCPUs straight in 64-bit
 * mode at the guest's ELF entry (no boot code): with 1 and 3 vCPUs, every
 * vCPU of the idle guest reports through the paravirtual port and prints
 * its line on the serial port (logged, subsystem "kvm"), its LAPIC timer
 * interrupts it out of hlt (ticks keep growing on every vCPU), and no
 * vCPU takes an exception. The dirty and verify guests boot too and write
 * pages (their `written` counters grow).
 */
#include <stdio.h>
#include <string.h>
#include "kvm_test.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static void boot_idle(unsigned nr_vcpus)
{
	struct kvm_vm_opts opts = { .guest_recheck = -1, .tick_ns = 1000000 };
	struct vmm *vm = kvm_test_vm(8 << 20, nr_vcpus, "idle", VMM_FILL_NONE, &opts);
	struct kvm_guest_report rep;
	char line[64];

	TEST_ASSERT(vmm_kvm.start(vm) == 0, "start");
	for (unsigned i = 0; i < nr_vcpus; i++) {
		struct gw_vcpu_area *a = kvm_test_area(vm, i);

		while (*(volatile uint64_t *)&a->ticks < 20)
			kvm_test_sleep_ms(5);
		TEST_CHECK(a->state == GW_VCPU_RUNNING, "vCPU %u state %llu", i,
			   (unsigned long long)a->state);
	}
	for (unsigned i = 0; i < nr_vcpus; i++) {
		snprintf(line, sizeof(line), "line=\"idle vcpu=%u\"", i);
		TEST_CHECK(kvm_test_log_count(line) >= 1, "serial line of vCPU %u missing", i);
	}
	vmm_kvm_guest_report(vm, &rep);
	TEST_CHECK(rep.panics == 0, "%llu guest exceptions", (unsigned long long)rep.panics);
	vmm_kvm.destroy(vm);
}

static void boot_writer(const char *workload)
{
	struct kvm_vm_opts opts = { .guest_recheck = -1 };
	struct vmm *vm = kvm_test_vm(16 << 20, 2, workload, VMM_FILL_ZERO, &opts);
	struct kvm_guest_report rep;

	TEST_ASSERT(vmm_kvm.start(vm) == 0, "start");
	for (unsigned i = 0; i < 2; i++) {
		struct gw_vcpu_area *a = kvm_test_area(vm, i);

		while (*(volatile uint64_t *)&a->written < 100)
			kvm_test_sleep_ms(5);
	}
	vmm_kvm_guest_report(vm, &rep);
	TEST_CHECK(rep.panics == 0, "%s: %llu guest exceptions", workload,
		   (unsigned long long)rep.panics);
	vmm_kvm.destroy(vm);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(240);
	boot_idle(1);
	boot_idle(3);
	boot_writer("dirty:ws=4M,pattern=page");
	boot_writer("dirty:ws=4M,pattern=byte");
	boot_writer("verify:ws=4M");
	TEST_EXIT();
}
