/* SPDX-License-Identifier: MIT */
/* Level-triggered interrupt lines for the soft VM (irq_lines.h). */
#include <errno.h>
#include <time.h>
#include "dev/irq_lines.h"

int vmm_irq_lines_init(struct vmm_irq_lines *l)
{
	pthread_condattr_t ca;
	int ret;

	l->level = 0;
	l->raises = 0;
	ret = pthread_mutex_init(&l->lock, NULL);
	if (ret)
		return -ret;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	ret = pthread_cond_init(&l->raised, &ca);
	pthread_condattr_destroy(&ca);
	if (ret) {
		pthread_mutex_destroy(&l->lock);
		return -ret;
	}
	return 0;
}

void vmm_irq_lines_destroy(struct vmm_irq_lines *l)
{
	if (!l)
		return;
	pthread_cond_destroy(&l->raised);
	pthread_mutex_destroy(&l->lock);
}

uint32_t vmm_irq_lines_level(struct vmm_irq_lines *l)
{
	uint32_t v;

	pthread_mutex_lock(&l->lock);
	v = l->level;
	pthread_mutex_unlock(&l->lock);
	return v;
}

uint32_t vmm_irq_lines_wait(struct vmm_irq_lines *l, uint32_t mask, uint64_t timeout_ns)
{
	struct timespec until;
	uint64_t kicks;
	uint32_t v;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(timeout_ns / 1000000000u);
	until.tv_nsec += (long)(timeout_ns % 1000000000u);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&l->lock);
	kicks = l->raises;
	/* Any raise (or kick) ends the wait: the caller looks at its lines again. */
	while (!(l->level & mask) && timeout_ns && l->raises == kicks)
		if (pthread_cond_timedwait(&l->raised, &l->lock, &until) == ETIMEDOUT)
			break;
	v = l->level & mask;
	pthread_mutex_unlock(&l->lock);
	return v;
}

void vmm_irq_lines_kick(struct vmm_irq_lines *l)
{
	pthread_mutex_lock(&l->lock);
	l->raises++;
	pthread_cond_broadcast(&l->raised);
	pthread_mutex_unlock(&l->lock);
}

static void set_level(void *opaque, uint32_t gsi, bool level)
{
	struct vmm_irq_lines *l = opaque;
	uint32_t bit;

	if (gsi >= VMM_IRQ_LINES)
		return;
	bit = 1u << gsi;
	pthread_mutex_lock(&l->lock);
	if (level && !(l->level & bit)) {
		l->level |= bit;
		l->raises++;
		pthread_cond_broadcast(&l->raised);
	} else if (!level) {
		l->level &= ~bit;
	}
	pthread_mutex_unlock(&l->lock);
}

const struct virtio_irq_ops vmm_irq_lines_ops = {
	.name = "soft-lines",
	.set_level = set_level,
};
