/* SPDX-License-Identifier: MIT */
/*
 * Invariant: when the engine's pause callback returns, no vCPU runs guest
 * code until resume: the guests' own counters (pages written, timer ticks)
 * do not move while paused, and move again after resume. Holds whatever the
 * vCPUs were doing when kicked: running flat out (dirty guest), halted in
 * the kernel waiting for an interrupt (idle guest with a long timer
 * period), or sleeping in the VMM between two paced batches (dirty guest
 * with a rate). 150 pause/resume cycles each.
 */
#include <stdio.h>
#include "kvm_test.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define CYCLES 150

static uint64_t counter(struct vmm *vm, unsigned i, bool ticks)
{
	struct gw_vcpu_area *a = kvm_test_area(vm, i);

	return ticks ? *(volatile uint64_t *)&a->ticks : *(volatile uint64_t *)&a->written;
}

static void cycles(const char *what, struct vmm *vm, unsigned nr, bool ticks, unsigned hold_ms)
{
	uint64_t before[4], after[4];

	for (unsigned c = 0; c < CYCLES; c++) {
		TEST_ASSERT(vmm_kvm.engine_ops->pause(vm) == 0, "pause");
		TEST_CHECK(vmm_kvm.state(vm) == VMM_PAUSED, "%s: state %s", what,
			   vmm_state_name(vmm_kvm.state(vm)));
		for (unsigned i = 0; i < nr; i++)
			before[i] = counter(vm, i, ticks);
		kvm_test_sleep_ms(c % 4 == 0 ? hold_ms : 1);
		for (unsigned i = 0; i < nr; i++) {
			after[i] = counter(vm, i, ticks);
			TEST_CHECK(after[i] == before[i], "%s cycle %u: vCPU %u ran while paused (%llu -> %llu)",
				   what, c, i, (unsigned long long)before[i], (unsigned long long)after[i]);
		}
		TEST_ASSERT(vmm_kvm.engine_ops->resume(vm) == 0, "resume");
		if (c % 10 == 0)	/* and they run again (bounded by the time bound) */
			for (unsigned i = 0; i < nr; i++)
				while (counter(vm, i, ticks) == after[i])
					kvm_test_sleep_ms(1);
	}
}

int main(void)
{
	struct kvm_vm_opts slow_tick = { .tick_ns = 200000000, .guest_recheck = 0 };
	struct kvm_vm_opts plain = { .guest_recheck = 0 };
	struct vmm *vm;

	kvm_test_require();
	kvm_test_time_bound(280);

	vm = kvm_test_vm(8 << 20, 3, "dirty:ws=4M,pattern=byte", VMM_FILL_NONE, &plain);
	TEST_ASSERT(vmm_kvm.start(vm) == 0, "start");
	cycles("running", vm, 3, false, 20);
	vmm_kvm.destroy(vm);

	vm = kvm_test_vm(8 << 20, 2, "idle", VMM_FILL_NONE, &slow_tick);
	TEST_ASSERT(vmm_kvm.start(vm) == 0, "start");
	for (unsigned i = 0; i < 2; i++)
		while (counter(vm, i, true) == 0)
			kvm_test_sleep_ms(5);
	cycles("halted", vm, 2, true, 250);
	vmm_kvm.destroy(vm);

	vm = kvm_test_vm(8 << 20, 2, "dirty:ws=4M,pattern=byte,rate=200", VMM_FILL_NONE, &plain);
	TEST_ASSERT(vmm_kvm.start(vm) == 0, "start");
	cycles("pacing", vm, 2, false, 30);
	vmm_kvm.destroy(vm);
	TEST_EXIT();
}
