/* SPDX-License-Identifier: MIT */
/*
 * One bandwidth cap over all channels (max-bandwidth-bps, live): a virtual
 * clock advanced by bytes / rate; a sender sleeps until its bytes' slot. A
 * burst allowance of 10 ms keeps short sleeps from dominating.
 */
#include <time.h>
#include "core/session_int.h"

#define GW_RL_BURST_NS 10000000ull

void gw_ratelimit(struct gw_session *s, uint64_t bytes)
{
	int64_t rate_bps = gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS);
	uint64_t now_ns, slot_ns, cost_ns;

	if (rate_bps <= 0)
		return;
	cost_ns = (uint64_t)((__uint128_t)bytes * 1000000000ull / (uint64_t)rate_bps);
	now_ns = gw_now_ns();
	pthread_mutex_lock(&s->rl_lock);
	if (s->rl_next_ns + GW_RL_BURST_NS < now_ns)
		s->rl_next_ns = now_ns - GW_RL_BURST_NS;
	slot_ns = s->rl_next_ns;
	s->rl_next_ns += cost_ns;
	pthread_mutex_unlock(&s->rl_lock);
	if (slot_ns > now_ns) {
		uint64_t wait_ns = slot_ns - now_ns;
		struct timespec ts = { .tv_sec = (time_t)(wait_ns / 1000000000ull),
				       .tv_nsec = (long)(wait_ns % 1000000000ull) };

		nanosleep(&ts, NULL);
	}
}
