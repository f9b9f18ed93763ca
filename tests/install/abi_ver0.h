/* SPDX-License-Identifier: MIT */
/*
 * The first version of libgodwit's growable ABI, frozen: the structs a
 * caller built against that version's headers has, with their sizes, and
 * the prototypes it calls. Nothing here may change, ever: it stands for a
 * program compiled once and run against every later libgodwit
 * (tests/install/abi_ver0.c, libgodwit(3) "ABI"). A later version appends
 * fields to its own headers; this file stays as it is.
 */
#ifndef ABI_VER0_H
#define ABI_VER0_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GW_RAM_NAME_MAX 32
#define GW_PAGE_BYTES 4096u
#define GW_STATS_STAGES 16
#define GW_STATS_CODECS 16

struct gw_state;
struct gw_session;

enum gw_role { GW_ROLE_SOURCE = 1, GW_ROLE_DEST = 2 };
enum gw_dirty_backend_id { GW_DIRTY_AUTO = 0 };

struct gw_ram_block {
	char name[GW_RAM_NAME_MAX];
	uint64_t gpa;
	void *host;
	uint64_t size_bytes;
	uint32_t page_size_bytes;
	int fd;
	uint64_t fd_offset_bytes;
	uint32_t kvm_slot;
};

struct gw_vm_info {
	uint32_t size;
	unsigned nr_blocks;
	struct gw_ram_block *blocks;
	int kvm_vm_fd;
	unsigned nr_vcpus;
	uint32_t kvm_dirty_ring_entries;
	void *const *kvm_dirty_rings;
	uint32_t *kvm_dirty_ring_fetch;
	int kvm_dirty_ring_full_efd;
};

struct gw_vm_ops {
	uint32_t size;
	int (*pause)(void *opaque);
	int (*resume)(void *opaque);
	int (*save_state)(void *opaque, struct gw_state *st);
	int (*load_state)(void *opaque, struct gw_state *st);
	int (*setup_ram)(void *opaque, const struct gw_vm_info *want,
			 struct gw_vm_info *vm, char *reason, size_t reason_len);
	int (*throttle)(void *opaque, unsigned pct);
	int (*dirty_limit)(void *opaque, uint64_t bytes_per_sec);
	void (*hints_start)(void *opaque, struct gw_session *s);
	void (*hints_stop)(void *opaque);
	int (*vcpu_of_thread)(void *opaque, pid_t tid);
	int (*postcopy_ram)(void *opaque, bool complete);
};

enum gw_status {
	GW_STATUS_NONE = 0,
	GW_STATUS_SETUP,
	GW_STATUS_ACTIVE,
	GW_STATUS_DEVICE,
	GW_STATUS_HANDOVER,
	GW_STATUS_COMPLETED,
	GW_STATUS_FAILED,
	GW_STATUS_CANCELLED,
	GW_STATUS_UNKNOWN,
	GW_STATUS_POSTCOPY_ACTIVE,
	GW_STATUS_POSTCOPY_PAUSED,
	GW_STATUS_POSTCOPY_RECOVER,
};

enum gw_verify {
	GW_VERIFY_OFF = 0,
	GW_VERIFY_PENDING,
	GW_VERIFY_OK,
	GW_VERIFY_MISMATCH,
	GW_VERIFY_UNKNOWN,
};

struct gw_round_stats {
	uint32_t size;
	uint32_t round;
	uint64_t duration_ns;
	uint64_t dirty_pages;
	uint64_t sent_bytes;
	uint64_t normal_pages, zero_pages, skipped_pages;
	uint64_t rate_bps;
	uint64_t dirty_rate_pps;
	uint64_t expected_downtime_ns;
	uint32_t throttle_pct;
	bool dirty_limit;
	uint64_t void_pages;
	uint64_t stage_ns[GW_STATS_STAGES];
};

struct gw_channel_stats {
	uint32_t size;
	uint32_t channel;
	uint64_t bytes;
	uint64_t codec_bytes[GW_STATS_CODECS];
};

struct gw_vcpu_stats {
	uint32_t size;
	uint32_t vcpu;
	uint64_t postcopy_blocktime_ns;
};

struct gw_downtime_breakdown {
	uint64_t pause_ns;
	uint64_t final_harvest_ns;
	uint64_t final_send_ns;
	uint64_t state_save_ns;
	uint64_t state_send_ns;
	uint64_t dst_load_ns;
	uint64_t handover_ns;
};

struct gw_stats {
	uint32_t size;
	enum gw_status status;
	char error[512];
	char error_phase[32];
	int error_code;
	uint64_t total_time_ns;
	uint64_t setup_time_ns;
	uint64_t downtime_ns;
	uint64_t expected_downtime_ns;
	uint64_t ram_total_bytes;
	uint64_t transferred_bytes;
	uint64_t remaining_bytes;
	uint64_t duplicate_pages;
	uint64_t normal_pages;
	uint64_t normal_bytes;
	uint64_t skipped_pages;
	uint64_t xbzrle_pages;
	uint64_t dirty_sync_count;
	uint64_t rate_bps;
	uint64_t pages_per_second;
	uint64_t dirty_pages_rate;
	uint64_t free_hinted_pages;
	uint64_t free_discarded_pages;
	uint64_t payload_bytes_raw;
	uint64_t payload_bytes_wire;
	uint64_t rtt_ns;
	uint32_t throttle_pct;
	uint64_t dirty_limit_bps;
	bool converging;
	char converge_hint[192];
	uint32_t rounds;
	unsigned nr_rounds_kept;
	unsigned nr_channels;
	struct gw_downtime_breakdown downtime;
	bool downtime_measured;
	enum gw_verify verify;
	bool verified;
	uint64_t verify_src_ns;
	uint64_t verify_dst_ns;
	uint64_t verify_faults;
	uint64_t cpu_user_ns, cpu_sys_ns;
	uint64_t stage_ns[GW_STATS_STAGES];
	uint64_t live_pages;
	uint64_t void_pages;
	uint64_t direct_pages;
	uint64_t zerocopy_sends, zerocopy_copied;
	char dirty_backend[16];
	char codec[16];
	bool postcopy;
	uint64_t postcopy_time_ns;
	uint64_t postcopy_paused_ns;
	uint32_t postcopy_recoveries;
	uint64_t postcopy_pages;
	uint64_t postcopy_remaining_pages;
	uint64_t postcopy_requests;
	uint64_t postcopy_pushed_pages;
	uint64_t postcopy_answered_pages;
	uint64_t postcopy_placed_requested;
	uint64_t postcopy_placed_pushed;
	uint64_t postcopy_dup_pages;
	uint64_t postcopy_faults;
	uint64_t postcopy_local_faults;
	uint64_t postcopy_blocktime_ns;
	uint64_t postcopy_vcpu_blocktime_total_ns;
	unsigned postcopy_nr_vcpus;
	uint64_t postcopy_latency_p50_ns, postcopy_latency_p99_ns, postcopy_latency_max_ns;
	uint64_t postcopy_latency_samples;
	char postcopy_reason[192];
	char tls[8];
	char tls_peer[192];
	char tls_cipher[48];
	bool ktls_tx, ktls_rx;
	char tls_records[8];
	uint64_t conns_refused;
};

_Static_assert(sizeof(struct gw_ram_block) == 80, "gw_ram_block, version 0");
_Static_assert(sizeof(struct gw_vm_info) == 56, "gw_vm_info, version 0");
_Static_assert(sizeof(struct gw_vm_ops) == 96, "gw_vm_ops, version 0");
_Static_assert(sizeof(struct gw_round_stats) == 224, "gw_round_stats, version 0");
_Static_assert(sizeof(struct gw_channel_stats) == 144, "gw_channel_stats, version 0");
_Static_assert(sizeof(struct gw_vcpu_stats) == 16, "gw_vcpu_stats, version 0");
_Static_assert(sizeof(struct gw_stats) == 1896, "gw_stats, version 0");

const char *gw_version(void);
int gw_dirty_probe(enum gw_dirty_backend_id id, const struct gw_vm_info *vm, char *why, size_t why_len);
struct gw_session *gw_session_new(enum gw_role role, const struct gw_vm_info *vm,
				  const struct gw_vm_ops *ops, void *opaque);
void gw_session_free(struct gw_session *s);
int gw_migrate_start(struct gw_session *s, const char *url);
int gw_incoming_start(struct gw_session *s, const char *url);
int gw_session_wait(struct gw_session *s);
const char *gw_session_error(struct gw_session *s, char *buf, size_t len);
int gw_session_stats(struct gw_session *s, struct gw_stats *out);
int gw_session_round(struct gw_session *s, unsigned idx, struct gw_round_stats *out);
int gw_session_channel(struct gw_session *s, unsigned idx, struct gw_channel_stats *out);
int gw_session_vcpu(struct gw_session *s, unsigned idx, struct gw_vcpu_stats *out);
int gw_state_add(struct gw_state *st, const char *name, uint32_t version, const void *data, size_t len_bytes);
const void *gw_state_find(const struct gw_state *st, const char *name, uint32_t *version, size_t *len_bytes);

#endif
