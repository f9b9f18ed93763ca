/* SPDX-License-Identifier: MIT */
/*
 * compute: run compute_iters steps of compute_algo.h (vCPU 0 only), count
 * them in `ticks`, report the result with GW_PV_DONE and halt. Tests pause,
 * save, load and resume it in the middle and compare the result with the
 * host's. Other vCPUs halt at once.
 */
#include "guest.h"
#include "compute_algo.h"

#define STEP_ITERS 256			/* progress published this often */

static struct compute_state st;

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	struct gw_vcpu_area *a = vcpu_area(idx);

	guest_init(idx, "compute");
	if (idx != 0)
		guest_halt_forever();
	compute_init(&st, bi->seed);
	while (st.done < bi->compute_iters) {
		uint64_t n = bi->compute_iters - st.done;

		compute_steps(&st, n < STEP_ITERS ? n : STEP_ITERS);
		publish_u64(&a->ticks, st.done);
	}
	publish_u64(&a->result, compute_result(&st));
	publish_u64(&a->state, GW_VCPU_DONE);
	a->args[0] = a->result;
	pv_call(GW_PV_DONE);
	guest_halt_forever();
}
