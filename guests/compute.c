/* SPDX-License-Identifier: MIT */
/*
 * compute: run compute_iters iterations of compute_algo.h (vCPU 0 only),
 * publish the iterations done in `ticks` after each block, report the
 * result with GW_PV_DONE and halt. Part of its state lives only in %xmm8
 * and %xmm9 (moved with movdqu, which KVM's emulator supports), so tests
 * that pause, save, load and resume it in the middle check general
 * registers, memory and XSAVE state at once. Other vCPUs halt at once.
 */
#include "guest.h"
#include "compute_algo.h"

static struct compute_state st;

static void zero2(uint64_t *p)
{
	publish_u64(&p[0], 0);
	publish_u64(&p[1], 0);
}

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	struct gw_vcpu_area *a = vcpu_area(idx);
	uint64_t iters = bi->compute_iters;

	guest_init(idx, "compute");
	if (idx != 0)
		guest_halt_forever();
	compute_init(&st, bi->seed);
	__asm__ __volatile__("movdqu %0, %%xmm9" : : "m"(st.vec));
	__asm__ __volatile__("movdqu %0, %%xmm8" : : "m"(st.roll));
	zero2(st.vec);
	zero2(st.roll);
	while (st.done < iters) {
		uint64_t n = iters - st.done;

		__asm__ __volatile__("movdqu %%xmm8, %0" : "=m"(st.roll));
		compute_block(&st, n < COMPUTE_BLOCK_ITERS ? n : COMPUTE_BLOCK_ITERS);
		__asm__ __volatile__("movdqu %0, %%xmm8" : : "m"(st.roll));
		zero2(st.roll);
		publish_u64(&a->ticks, st.done);
	}
	__asm__ __volatile__("movdqu %%xmm8, %0" : "=m"(st.roll));
	__asm__ __volatile__("movdqu %%xmm9, %0" : "=m"(st.vec));
	publish_u64(&a->result, compute_result(&st));
	publish_u64(&a->state, GW_VCPU_DONE);
	a->args[0] = a->result;
	pv_call(GW_PV_DONE);
	guest_halt_forever();
}
