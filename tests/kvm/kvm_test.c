/* SPDX-License-Identifier: MIT */
/* Helpers for the KVM tests (kvm_test.h). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "kvm_test.h"
#include "test_util.h"

#define RING_LINES 64
#define LINE_MAX_BYTES 400

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_ring[RING_LINES][LINE_MAX_BYTES];
static unsigned log_next;
static bool log_verbose;
static char *log_all;			/* every line, for kvm_test_log_count */
static size_t log_all_len, log_all_cap;

static void sink(void *opaque, enum gw_log_level level, const char *line)
{
	size_t n = strlen(line);

	(void)opaque;
	pthread_mutex_lock(&log_lock);
	snprintf(log_ring[log_next++ % RING_LINES], LINE_MAX_BYTES, "%s", line);
	if (log_all_len + n + 2 > log_all_cap) {
		size_t cap = (log_all_cap ? log_all_cap * 2 : 1 << 16) + n;
		char *p = realloc(log_all, cap);

		if (p) {
			log_all = p;
			log_all_cap = cap;
		}
	}
	if (log_all_len + n + 2 <= log_all_cap) {
		memcpy(log_all + log_all_len, line, n);
		log_all_len += n;
		log_all[log_all_len++] = '\n';
		log_all[log_all_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
	if (log_verbose || level == GW_LOG_ERROR)
		fprintf(stderr, "%s\n", line);
}

unsigned kvm_test_log_count(const char *needle)
{
	unsigned n = 0;

	pthread_mutex_lock(&log_lock);
	for (const char *p = log_all; p && (p = strstr(p, needle)); p++)
		n++;
	pthread_mutex_unlock(&log_lock);
	return n;
}

static void on_alarm(int sig)
{
	(void)sig;
	fprintf(stderr, "==== time bound exceeded; last log lines ====\n");
	for (unsigned i = 0; i < RING_LINES; i++) {
		const char *l = log_ring[(log_next + i) % RING_LINES];

		if (l[0])
			fprintf(stderr, "%s\n", l);
	}
	_exit(1);
}

void kvm_test_time_bound(unsigned seconds)
{
	signal(SIGALRM, on_alarm);
	alarm(seconds);
}

void kvm_test_require(void)
{
	char why[256] = "";

	log_verbose = getenv("GW_TEST_VERBOSE") != NULL;
	gw_log_set_sink(sink, NULL);
	gw_log_set_level(GW_LOG_INFO);	/* the events looked for are INFO */
	if (vmm_kvm.probe(why, sizeof(why)) != 0)
		test_skip("%s", why[0] ? why : "/dev/kvm unusable");
}

struct vmm *kvm_test_vm(uint64_t memory_bytes, unsigned nr_vcpus, const char *workload,
			enum vmm_fill fill, const struct kvm_vm_opts *opts)
{
	struct vmm_config cfg = {
		.memory_bytes = memory_bytes, .nr_vcpus = nr_vcpus, .fill = fill, .seed = 7,
		.workload = workload, .incoming = memory_bytes == 0,
	};
	char err[256] = "";
	struct vmm *vm = vmm_kvm_create_opts(&cfg, opts, err, sizeof(err));

	TEST_ASSERT(vm, "KVM VM (%s): %s", workload ? workload : "idle", err);
	return vm;
}

struct gw_vcpu_area *kvm_test_area(struct vmm *vm, unsigned i)
{
	struct gw_vcpu_area *a = vmm_kvm_gpa_to_host(vm, GW_GUEST_VCPU_AREA_GPA +
						     i * GW_VCPU_AREA_BYTES, GW_VCPU_AREA_BYTES);

	TEST_ASSERT(a, "vCPU area %u", i);
	return a;
}

uint64_t kvm_test_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void kvm_test_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

void kvm_test_wait_progress(struct vmm *vm, uint64_t target)
{
	while (vmm_kvm.progress(vm) < target)
		kvm_test_sleep_ms(5);
}

void kvm_test_copy_ram(struct vmm *src, struct vmm *dst)
{
	const struct gw_vm_info *s = vmm_kvm.info(src), *d = vmm_kvm.info(dst);

	TEST_ASSERT(s->nr_blocks == d->nr_blocks, "blocks %u vs %u", s->nr_blocks, d->nr_blocks);
	for (unsigned i = 0; i < s->nr_blocks; i++) {
		TEST_ASSERT(s->blocks[i].size_bytes == d->blocks[i].size_bytes, "block %u size", i);
		memcpy(d->blocks[i].host, s->blocks[i].host, s->blocks[i].size_bytes);
	}
}
