/* SPDX-License-Identifier: MIT */
/*
 * What `godwit run` was started with: filled by the command line
 * (cli/options.c), then read-only for the running VM (run.h's opts).
 */
#ifndef GW_CLI_RUN_OPTS_H
#define GW_CLI_RUN_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include "common/params.h"
#include "dev/virtio_net.h"
#include "vmm.h"

#define RUN_MAX_NICS VMM_MAX_NICS

/* `run` options; also the VM half of `demo`. */
struct run_opts {
	uint64_t memory_bytes;
	bool memory_given;		/* --memory on the command line */
	const char *memory_arg;		/* its value as typed (messages), NULL: not given */
	unsigned nr_vcpus;
	const char *accel;		/* "auto", "soft", "kvm" */
	const char *workload;		/* NULL = the VM's default */
	const char *fill;		/* soft_fill name */
	bool fill_given;		/* --fill on the command line */
	uint64_t seed;
	bool seed_given;
	const char *memory_file;
	bool prealloc;			/* allocate and zero RAM at start (-mem-prealloc) */
	const char *api_path;
	const char *qmp_path;
	const char *incoming_url;	/* URL, or "defer" */
	struct cli_params params;	/* --set */
	const char *log_level;		/* NULL = default (info, set by run) */
	bool exit_after_migrate;
	bool max_memory_given;		/* --max-memory */
	struct virtio_net_nic nics[RUN_MAX_NICS];	/* --nic, in order: NIC i is nics[i] */
	unsigned nr_nics;
};

#endif
