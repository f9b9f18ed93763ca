/* SPDX-License-Identifier: MIT */
/* Workload specs (see workload.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "content.h"
#include "workload.h"

#define DIRTY_DEFAULT_WS_BYTES (256ull << 20)
#define BALLOON_DEFAULT_WINDOW 64

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B') {	/* accept "Mi", "MB", "MiB" */
		if (*end == 'i')
			end++;
		if (*end == 'B')
			end++;
	}
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static const char *const kind_names[] = {
	[VMM_WL_IDLE] = "idle", [VMM_WL_DIRTY] = "dirty", [VMM_WL_VERIFY] = "verify",
	[VMM_WL_BALLOON] = "balloon",
};

int vmm_workload_parse(const char *spec, struct vmm_workload *wl, char *err, size_t err_len)
{
	char buf[VMM_WORKLOAD_SPEC_MAX * 2];
	char *args, *tok, *save = NULL;

	memset(wl, 0, sizeof(*wl));
	if (!spec || !*spec)
		spec = "idle";
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, err_len, "workload spec too long");
		return -EINVAL;
	}
	strcpy(buf, spec);
	args = strchr(buf, ':');
	if (args)
		*args++ = '\0';
	if (strcmp(buf, "idle") == 0) {
		wl->kind = VMM_WL_IDLE;
	} else if (strcmp(buf, "dirty") == 0) {
		wl->kind = VMM_WL_DIRTY;
		wl->ws_bytes = DIRTY_DEFAULT_WS_BYTES;
		wl->pattern_page = true;
	} else if (strcmp(buf, "verify") == 0) {
		wl->kind = VMM_WL_VERIFY;
	} else if (strcmp(buf, "balloon") == 0) {
		wl->kind = VMM_WL_BALLOON;
		wl->window_pages = BALLOON_DEFAULT_WINDOW;
	} else {
		snprintf(err, err_len, "unknown workload '%s' (idle, dirty, verify, balloon)", buf);
		return -EINVAL;
	}
	if (!args)
		return 0;
	for (tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *val = strchr(tok, '=');

		if (!val) {
			snprintf(err, err_len, "workload option '%s' needs a value", tok);
			return -EINVAL;
		}
		*val++ = '\0';
		if (strcmp(tok, "ws") == 0 && wl->kind != VMM_WL_IDLE) {
			if (parse_size(val, &wl->ws_bytes) || wl->ws_bytes < VMM_PAGE_BYTES) {
				snprintf(err, err_len, "bad working set size '%s'", val);
				return -EINVAL;
			}
			wl->ws_given = true;
		} else if (strcmp(tok, "pattern") == 0 && wl->kind == VMM_WL_DIRTY) {
			if (strcmp(val, "page") == 0) {
				wl->pattern_page = true;
			} else if (strcmp(val, "byte") == 0) {
				wl->pattern_page = false;
			} else {
				snprintf(err, err_len, "bad pattern '%s' (byte, page)", val);
				return -EINVAL;
			}
		} else if (strcmp(tok, "rate") == 0 && wl->kind != VMM_WL_IDLE) {
			if (parse_size(val, &wl->rate_pps)) {
				snprintf(err, err_len, "bad rate '%s' (pages per second)", val);
				return -EINVAL;
			}
		} else if (strcmp(tok, "keep") == 0 && wl->kind == VMM_WL_BALLOON) {
			if (parse_size(val, &wl->keep_bytes) || wl->keep_bytes < VMM_PAGE_BYTES) {
				snprintf(err, err_len, "bad kept size '%s'", val);
				return -EINVAL;
			}
		} else if (strcmp(tok, "window") == 0 && wl->kind == VMM_WL_BALLOON) {
			if (parse_size(val, &wl->window_pages) || !wl->window_pages || wl->window_pages > 1u << 20) {
				snprintf(err, err_len, "bad window '%s' (1..1M pages)", val);
				return -EINVAL;
			}
		} else {
			snprintf(err, err_len, "unknown option '%s' for workload %s", tok, kind_names[wl->kind]);
			return -EINVAL;
		}
	}
	return 0;
}

uint64_t vmm_workload_ws_pages(const struct vmm_workload *wl, uint64_t ram_pages)
{
	uint64_t pages;

	if (wl->kind == VMM_WL_IDLE)
		return 0;
	if ((wl->kind == VMM_WL_VERIFY || wl->kind == VMM_WL_BALLOON) && !wl->ws_given)
		return ram_pages;
	pages = wl->ws_bytes / VMM_PAGE_BYTES;
	return pages < ram_pages ? pages : ram_pages;
}

void vmm_workload_format(const struct vmm_workload *wl, uint64_t ws_pages, char *buf,
			  size_t len)
{
	switch (wl->kind) {
	case VMM_WL_DIRTY:
		snprintf(buf, len, "dirty:ws=%" PRIu64 ",pattern=%s,rate=%" PRIu64,
			 ws_pages * VMM_PAGE_BYTES, wl->pattern_page ? "page" : "byte",
			 wl->rate_pps);
		break;
	case VMM_WL_VERIFY:
		if (wl->rate_pps)
			snprintf(buf, len, "verify:ws=%" PRIu64 ",rate=%" PRIu64,
				 ws_pages * VMM_PAGE_BYTES, wl->rate_pps);
		else
			snprintf(buf, len, "verify:ws=%" PRIu64, ws_pages * VMM_PAGE_BYTES);
		break;
	case VMM_WL_BALLOON:
		snprintf(buf, len, "balloon:ws=%" PRIu64 ",keep=%" PRIu64 ",window=%" PRIu64 ",rate=%" PRIu64,
			 ws_pages * VMM_PAGE_BYTES, vmm_workload_keep_pages(wl, ws_pages) * VMM_PAGE_BYTES,
			 wl->window_pages, wl->rate_pps);
		break;
	default:
		snprintf(buf, len, "idle");
		break;
	}
}

uint64_t vmm_workload_keep_pages(const struct vmm_workload *wl, uint64_t ws_pages)
{
	uint64_t keep = wl->keep_bytes ? wl->keep_bytes / VMM_PAGE_BYTES : ws_pages / 8;

	return keep < ws_pages ? keep : ws_pages;
}

bool vmm_workload_checkable(const struct vmm_workload *wl)
{
	return wl->kind == VMM_WL_DIRTY || wl->kind == VMM_WL_VERIFY || wl->kind == VMM_WL_BALLOON;
}
