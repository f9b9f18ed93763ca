/* SPDX-License-Identifier: MIT */
/*
 * How many frames per second the KVM NIC guests forward on this host:
 * a KVM VM running `l2fwd` or `echo` (guests/, the driver of
 * common/vnet_drv.c) with one NIC on a socketpair (net_backend_fd); this
 * program is the network. It keeps WINDOW gwpktgen frames of 64 bytes
 * (60 and the FCS a wire would add, bench/pgframe.h) in flight, sends one
 * more for each that comes back, and counts those that come back intact
 * (MACs swapped, CRC good) over SECONDS, three times. Prints one line per
 * run (with the 100 ms waits in which nothing came back) and the median,
 * min and max. Exits 77 where /dev/kvm is unusable.
 * On a nested host that emulates guest instructions the rate is the
 * emulator's speed, and it depends on how busy the host is.
 *
 *   build/bench/kvm_net_rate [SECONDS] [WINDOW] [WORKLOAD]
 *
 * (defaults 3, 32, l2fwd; WINDOW at most 64, the guest's receive buffers).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "dev/virtio_net.h"
#include "guest_abi.h"
#include "kvm/kvm_vm.h"
#include "pgframe.h"

#define RUNS 3
#define FRAME_BYTES 60u
#define RUN_ID 0x72617465u
#define WINDOW_MAX 64u

static const uint8_t net_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static const uint8_t guest_mac[6] = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x20 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Frames back whole per second over @secs, at most @window in flight;
 * *stalls counts the 100 ms waits in which none came back.
 */
static double run_once(int fd, unsigned secs, unsigned window, uint64_t *seq, unsigned *stalls)
{
	uint64_t t0 = now_ns(), end = t0 + secs * 1000000000ull, back = 0;
	unsigned inflight = 0;
	uint8_t f[2048];

	while (now_ns() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		while (inflight < window) {
			pgframe_build(f, guest_mac, net_mac, FRAME_BYTES, RUN_ID, *seq);
			pgframe_seal(f, FRAME_BYTES, now_ns());
			if (send(fd, f, FRAME_BYTES, MSG_DONTWAIT) != FRAME_BYTES)
				break;
			(*seq)++;
			inflight++;
		}
		if (poll(&p, 1, 100) <= 0) {
			(*stalls)++;
			continue;
		}
		while ((n = recv(fd, f, sizeof(f), MSG_DONTWAIT)) > 0) {
			uint64_t s;

			if (pgframe_check(f, (size_t)n, net_mac, RUN_ID, &s) != PGFRAME_OK ||
			    memcmp(f + 6, guest_mac, 6) != 0)
				continue;	/* an announce, or a frame of the run before: not counted */
			back++;
			inflight -= inflight > 0;
		}
	}
	return back * 1e9 / (double)(now_ns() - t0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
	unsigned window = argc > 2 ? (unsigned)atoi(argv[2]) : 32;
	const char *workload = argc > 3 ? argv[3] : "l2fwd";
	struct virtio_net_nic nic = { .mac_set = true };
	char why[256] = "", err[256] = "";
	double pps[RUNS];
	unsigned stalls[RUNS] = { 0 };
	uint64_t seq = 0;
	struct vmm *vm;
	int sv[2];

	if (!secs || secs > 600 || !window || window > WINDOW_MAX ||
	    (strcmp(workload, "l2fwd") && strcmp(workload, "echo"))) {
		fprintf(stderr, "usage: kvm_net_rate [SECONDS 1..600] [WINDOW 1..%u] [l2fwd|echo]\n",
			WINDOW_MAX);
		return 2;
	}
	gw_log_set_level(GW_LOG_WARN);
	if (vmm_kvm.probe(why, sizeof(why))) {
		fprintf(stderr, "kvm_net_rate: KVM not usable here: %s\n", why);
		return 77;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		perror("kvm_net_rate: socketpair");
		return 1;
	}
	memcpy(nic.mac, guest_mac, sizeof(nic.mac));
	struct vmm_config cfg = {
		.memory_bytes = 16 << 20, .nr_vcpus = 1, .fill = VMM_FILL_NONE, .workload = workload,
		.nics = &nic, .nr_nics = 1, .nic_fds = &sv[1],
	};
	vm = vmm_kvm.create(&cfg, err, sizeof(err));
	if (!vm || vmm_kvm.start(vm)) {
		fprintf(stderr, "kvm_net_rate: %s\n", vm ? "start failed" : err);
		return 1;
	}
	for (int i = 0; i < RUNS; i++) {
		pps[i] = run_once(sv[0], secs, window, &seq, &stalls[i]);
		printf("kvm_net_rate: workload=%s window=%u run=%d seconds=%u pps=%.0f stalls_100ms=%u\n",
		       workload, window, i + 1, secs, pps[i], stalls[i]);
	}
	qsort(pps, RUNS, sizeof(pps[0]), cmp_double);
	printf("kvm_net_rate: workload=%s frame_bytes=%u window=%u pps median=%.0f min=%.0f max=%.0f\n",
	       workload, FRAME_BYTES + 4, window, pps[RUNS / 2], pps[0], pps[RUNS - 1]);
	vmm_kvm.destroy(vm);
	close(sv[0]);
	return 0;
}
