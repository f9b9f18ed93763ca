/* SPDX-License-Identifier: MIT */
/* Does a VM's RAM fit this host (hostmem.h)? */
#include "common/hostmem.h"
#include <godwit/log.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int cli_host_mem_read(const char *path, struct cli_host_mem *h)
{
	static const struct { const char *key; size_t off; } keys[] = {
		{ "MemTotal:", offsetof(struct cli_host_mem, ram_bytes) },
		{ "MemAvailable:", offsetof(struct cli_host_mem, available_bytes) },
		{ "SwapTotal:", offsetof(struct cli_host_mem, swap_bytes) },
		{ "SwapFree:", offsetof(struct cli_host_mem, swap_free_bytes) },
	};
	FILE *f = fopen(path ? path : "/proc/meminfo", "re");
	char line[128];

	memset(h, 0, sizeof(*h));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			uint64_t kib;

			if (!strncmp(line, keys[i].key, strlen(keys[i].key)) &&
			    sscanf(line + strlen(keys[i].key), "%" SCNu64, &kib) == 1 && kib < (UINT64_MAX >> 10))
				*(uint64_t *)((char *)h + keys[i].off) = kib << 10;
		}
	}
	fclose(f);
	return h->ram_bytes ? 0 : -EPROTO;
}

/* The largest --memory of at most @bytes the user can type: "20G", "512M", "4K". */
static void size_at_most(uint64_t bytes, char *buf, size_t len)
{
	if (bytes >= (1ull << 30))
		snprintf(buf, len, "%" PRIu64 "G", bytes >> 30);
	else if (bytes >= (1ull << 20))
		snprintf(buf, len, "%" PRIu64 "M", bytes >> 20);
	else
		snprintf(buf, len, "%" PRIu64 "K", (bytes >> 12) << 2);
}

int cli_memory_fits(const struct cli_host_mem *h, uint64_t memory_bytes, unsigned copies,
		    const char *by, const char *alt, char *why, size_t why_len)
{
	uint64_t host = h->ram_bytes + h->swap_bytes, avail = h->available_bytes + h->swap_free_bytes;
	char ram[32], swap[48], a[32], want[32], most[32];

	gw_size_str(ram, sizeof(ram), h->ram_bytes);	/* sizes as --memory takes them */
	if (h->swap_bytes)
		snprintf(swap, sizeof(swap), "%s of swap", gw_size_str(a, sizeof(a), h->swap_bytes));
	else
		snprintf(swap, sizeof(swap), "no swap");
	if (memory_bytes > host) {
		size_at_most(host, most, sizeof(most));
		snprintf(why, why_len, "more than this host's memory (%s of RAM, %s), which the guest "
			 "could never use whole: give --memory %s or less", ram, swap, most);
		return -ENOMEM;
	}
	if (copies && memory_bytes > avail / copies) {
		gw_size_str(want, sizeof(want), memory_bytes * copies);
		size_at_most(avail / copies, most, sizeof(most));
		snprintf(why, why_len, "%s: %s, more than the %s this host has available now (of %s of RAM, "
			 "%s): give --memory %s or less%s", by, want, gw_size_str(a, sizeof(a), avail), ram, swap,
			 most, alt);
		return -ENOMEM;
	}
	return 0;
}
