/* SPDX-License-Identifier: MIT */
/*
 * The names of the statistics' enumerations. The statistics themselves are
 * published by the two sides (source.c, dest.c) and copied out by
 * gw_session_stats (core/util.c); JSON is the tool's (tools/stats_json.c).
 */
#include <godwit/stats.h>

static const char *const status_names[] = {
	[GW_STATUS_NONE] = "none", [GW_STATUS_SETUP] = "setup", [GW_STATUS_ACTIVE] = "active",
	[GW_STATUS_DEVICE] = "device", [GW_STATUS_HANDOVER] = "handover",
	[GW_STATUS_COMPLETED] = "completed", [GW_STATUS_FAILED] = "failed",
	[GW_STATUS_CANCELLED] = "cancelled", [GW_STATUS_UNKNOWN] = "unknown",
	[GW_STATUS_POSTCOPY_ACTIVE] = "postcopy-active", [GW_STATUS_POSTCOPY_PAUSED] = "postcopy-paused",
	[GW_STATUS_POSTCOPY_RECOVER] = "postcopy-recover", [GW_STATUS_PRE_SWITCHOVER] = "pre-switchover",
};

static const char *const stage_names[GW_STAGE__COUNT] = {
	[GW_STAGE_READ] = "read", [GW_STAGE_CLASSIFY] = "classify", [GW_STAGE_COMPRESS] = "compress",
	[GW_STAGE_SEND] = "send", [GW_STAGE_SETTLE] = "settle", [GW_STAGE_RECV] = "recv",
	[GW_STAGE_CHECK] = "check", [GW_STAGE_DECOMPRESS] = "decompress", [GW_STAGE_APPLY] = "apply",
};

const char *gw_stage_name(enum gw_stage st)
{
	return (unsigned)st < GW_STAGE__COUNT ? stage_names[st] : "unknown";
}

const char *gw_status_name(enum gw_status st)
{
	return (unsigned)st < sizeof(status_names) / sizeof(status_names[0]) ? status_names[st] : "invalid";
}

static const char *const verify_names[] = {
	[GW_VERIFY_OFF] = "off", [GW_VERIFY_PENDING] = "pending", [GW_VERIFY_OK] = "ok",
	[GW_VERIFY_MISMATCH] = "mismatch", [GW_VERIFY_UNKNOWN] = "unknown",
};

const char *gw_verify_name(enum gw_verify v)
{
	return (unsigned)v < sizeof(verify_names) / sizeof(verify_names[0]) ? verify_names[v] : "invalid";
}

