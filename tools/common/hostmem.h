/* SPDX-License-Identifier: MIT */
/*
 * Does a VM's RAM fit this host? Checked before the VM is made, so that a
 * size the host cannot hold is refused with its figures instead of filling
 * memory until the OOM killer ends the process.
 *
 * RAM that is only mapped (a memfd hole, --fill none) costs nothing until
 * the guest writes it: it may be up to the host's RAM and swap. RAM
 * allocated at start (--prealloc, or a --fill that writes every page) must
 * fit in what the host has available now (MemAvailable and free swap).
 */
#ifndef GW_CLI_HOSTMEM_H
#define GW_CLI_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

/* This host's memory, from /proc/meminfo. */
struct cli_host_mem {
	uint64_t ram_bytes;		/* MemTotal */
	uint64_t available_bytes;	/* MemAvailable: allocatable without swapping */
	uint64_t swap_bytes;		/* SwapTotal */
	uint64_t swap_free_bytes;	/* SwapFree */
};

/* Read @path (NULL: /proc/meminfo) into @h. 0, or -errno (-EPROTO: no MemTotal). */
int cli_host_mem_read(const char *path, struct cli_host_mem *h);

/*
 * Whether a VM of @memory_bytes fits @h when @copies VMs of that size
 * (0, 1 or 2: demo's two VMs) allocate all of it. @by says how
 * ("--prealloc allocates all of it at start"), @alt what else the user may
 * do (", or leave out --prealloc"). 0, or -ENOMEM with the figures and what to do in @why,
 * to follow "--memory SIZE: ".
 */
int cli_memory_fits(const struct cli_host_mem *h, uint64_t memory_bytes, unsigned copies,
		    const char *by, const char *alt, char *why, size_t why_len);

#endif
