/* SPDX-License-Identifier: MIT */
/*
 * Setting a migration up on the destination: the first HELLO this
 * destination can hold (the acceptor, admit.h, brought it in), the RAM
 * layout, the data connections. A HELLO refused before anything is
 * committed (undecodable, no common version or codec, more RAM than
 * max-memory-bytes, a layout the VMM refuses) is answered with ERROR on its
 * own connection and the destination keeps waiting for another source.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "net/admit.h"
#include "pipe/channel.h"
#include "codec/codec.h"
#include "dest/dest.h"
#include "net/tls.h"
#include "dest/postcopy.h"
#include "mem/mapped.h"
#include "wire/frame.h"
#include <godwit/version.h>

/* What this destination can do with a decoded HELLO: 0, or -errno with @why. */
static int hello_acceptable(const struct gw_session *s, const struct gw_msg_hello *h,
			    char *why, size_t why_len)
{
	uint64_t max_bytes = (uint64_t)gw_param(s, GW_PARAM_MAX_MEMORY_BYTES);
	enum gw_codec_id codec;

	if (h->min_version > GW_WIRE_VERSION || h->max_version < GW_WIRE_VERSION) {
		snprintf(why, why_len, "no common wire version (the source speaks %u..%u, %s; this destination "
			 "%u, godwit %s): run releases of one wire version on both ends", h->min_version,
			 h->max_version, gw_wire_release(h->max_version), GW_WIRE_VERSION, GW_VERSION_STRING);
		return -EPROTONOSUPPORT;
	}
	if (gw_wire_codec_to_id(h->codec, &codec) ||
	    (codec != GW_CODEC_AUTO && codec != GW_CODEC_NONE && !gw_codec_get(codec))) {
		snprintf(why, why_len, "the source compresses with %s, which this destination's build lacks: "
			 "migrate with another compression (none, zstd, lz4, zlib, isal, auto)",
			 codec < GW_CODEC__COUNT && gw_codec_name(codec) ? gw_codec_name(codec) : "an unknown codec");
		return -EOPNOTSUPP;
	}
	if ((h->flags & GW_HELLO_LOCAL) && (!s->url.ops->can_pass_fds || s->tls_ctx)) {
		snprintf(why, why_len, "a local migration passes RAM by file descriptor, which needs a unix: URL "
			 "without TLS; this destination listens on %s:%s", s->url.ops->scheme,
			 s->tls_ctx ? " with TLS" : "");
		return -EPROTO;
	}
	if (max_bytes) {
		uint64_t total = 0;

		for (unsigned i = 0; i < h->nr_blocks; i++)
			total += h->blocks[i].size_bytes;	/* blocks <= 2^52 bytes each (msg.c): no overflow */
		if (total > max_bytes) {
			char have[16], cap[16];

			snprintf(why, why_len, "the source's RAM is %s (%llu bytes), more than this destination "
				 "accepts: %s (max-memory-bytes; godwit run: --max-memory, or this host's RAM); "
				 "give the destination at least %s", gw_size_str(have, sizeof(have), total),
				 (unsigned long long)total, gw_size_str(cap, sizeof(cap), max_bytes), have);
			return -ERANGE;
		}
	}
	if ((h->flags & GW_HELLO_POSTCOPY) && ((h->flags & GW_HELLO_LOCAL) || h->nr_channels >= GW_WIRE_MAX_CHANNELS)) {
		snprintf(why, why_len, "postcopy takes at most %u data channels and no local migration; the "
			 "source asked for %u%s", GW_WIRE_MAX_CHANNELS - 1, h->nr_channels,
			 (h->flags & GW_HELLO_LOCAL) ? " and a local migration" : "");
		return -EPROTO;
	}
	if ((h->flags & GW_HELLO_POSTCOPY) && !s->ops->postcopy_ram) {
		/* A VMM without it cannot be told RAM is incomplete. */
		snprintf(why, why_len, "postcopy: this destination's VMM does not support it (no postcopy_ram callback)");
		return -EOPNOTSUPP;
	}
	if (h->flags & GW_HELLO_POSTCOPY)
		return pcd_probe(why, why_len);
	return 0;
}

/* Local migration: the FDS message with one descriptor per block. 0, or -EPROTO with @why. */
static int recv_fds(struct gw_session *s, const struct gw_msg_hello *h, int *fds, int *nr_fds,
		    char *why, size_t why_len)
{
	uint8_t buf[4 + GW_MAX_RAM_BLOCKS * 4];
	union gw_msg m;
	int type = gw_conn_recv_msg_fds(&s->ctl, &m, buf, sizeof(buf), fds, GW_MAX_RAM_BLOCKS,
					nr_fds, NULL, 0);

	if (type != GW_MSG_FDS || *nr_fds != (int)h->nr_blocks || m.fds.count != h->nr_blocks) {
		for (int i = 0; i < *nr_fds; i++)
			close(fds[i]);
		*nr_fds = 0;
		snprintf(why, why_len, "a local migration passes one file descriptor per RAM block (%u) and "
			 "they did not arrive: run both ends on this host, over unix:", h->nr_blocks);
		return -EPROTO;
	}
	return 0;
}

/*
 * Without a setup_ram callback: the layout given at creation must be the
 * announced one, and so must the vCPU count when both ends give one.
 */
static int layout_compare(struct gw_session *s, const struct gw_vm_info *want, char *why, size_t why_len)
{
	if (want->nr_vcpus && s->vm.nr_vcpus && want->nr_vcpus != s->vm.nr_vcpus) {
		snprintf(why, why_len, "the source's VM has %u vCPUs, this destination's %u", want->nr_vcpus,
			 s->vm.nr_vcpus);
		return -ERANGE;
	}
	if (s->vm.nr_blocks != want->nr_blocks) {
		snprintf(why, why_len, "the source's RAM is %u blocks, this destination's VM has %u: it must "
			 "be made with the source's RAM layout", want->nr_blocks, s->vm.nr_blocks);
		return -ERANGE;
	}
	for (unsigned i = 0; i < want->nr_blocks; i++) {
		char name[GW_LOG_STR_MAX(GW_RAM_NAME_MAX)];	/* the source's: its bytes, escaped */

		if (strcmp(s->vm.blocks[i].name, want->blocks[i].name) ||
		    s->vm.blocks[i].size_bytes != want->blocks[i].size_bytes) {
			char a[16], b[16];

			snprintf(why, why_len, "the source's RAM block %s is %s, this destination's %s is %s: "
				 "its VM must be made with the source's RAM layout",
				 gw_log_str(name, sizeof(name), want->blocks[i].name),
				 gw_size_str(a, sizeof(a), want->blocks[i].size_bytes), s->vm.blocks[i].name,
				 gw_size_str(b, sizeof(b), s->vm.blocks[i].size_bytes));
			return -ERANGE;
		}
	}
	return 0;
}

/*
 * Whether fd-backed block @b is mapped here page for page (the VMM
 * preallocated it through its mapping): then pages are received and written
 * through the mapping, with no fault and no pwrite copy. Otherwise the
 * file is written (pwrite into the page cache): a first touch through the
 * mapping costs far more on this host than the copy.
 */
static bool block_mapped(const struct gw_ram_block *b, int pagemap_fd)
{
	uint64_t nr = b->size_bytes / GW_PAGE_BYTES;

	return pagemap_fd >= 0 && gw_mapped_count(pagemap_fd, b->host, nr) == (int64_t)nr;
}

/*
 * The receive layout over the blocks the VMM built. The write path of each
 * block (choose_write_paths) is decided later, once the channels are in.
 */
static int layout_build(struct gw_session *s, const struct gw_vm_info *want)
{
	int ret = 0;

	if (s->vm.nr_blocks != want->nr_blocks)
		return gw_fail(s, GW_PHASE_SETUP, -ERANGE, "RAM layout refused by the VMM");
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];
		struct gw_dst_block *db = &s->dst->dblk[i];
		char name[GW_LOG_STR_MAX(GW_RAM_NAME_MAX)];	/* a VMM's setup_ram takes the source's names */

		if (!b->host || b->size_bytes != want->blocks[i].size_bytes || b->page_size_bytes != GW_PAGE_BYTES) {
			ret = gw_fail(s, GW_PHASE_SETUP, -ERANGE, "VMM built block %s wrongly",
				      gw_log_str(name, sizeof(name), b->name));
			break;
		}
		db->host = b->host;
		db->fd = (s->dst->hello_flags & GW_HELLO_LOCAL) ? -1 : b->fd;
		db->fd_offset_bytes = b->fd_offset_bytes;
		db->nr_pages = b->size_bytes / GW_PAGE_BYTES;
		db->map_write = false;
		if (gw_bitmap_init(&db->written, db->nr_pages) || gw_bitmap_init(&db->stale, db->nr_pages)) {
			ret = gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory for bitmaps");
			break;
		}
	}
	if (ret)
		return ret;
	s->dst->layout = (struct gw_dst_layout){ .nr_blocks = s->vm.nr_blocks, .blocks = s->dst->dblk,
						 .xbzrle = (s->dst->hello_flags & GW_HELLO_XBZRLE) != 0 };
	s->layout = &s->dst->layout;
	return 0;
}

/*
 * Compare the announced layout with ours, or let the VMM build it. Takes
 * the fds. 0; 1 with @why when refused before anything was committed (the
 * destination waits for another source); or the sticky error.
 */
static int setup_layout(struct gw_session *s, const struct gw_msg_hello *h, int *fds, int nr_fds,
			char *why, size_t why_len)
{
	struct gw_ram_block blocks[GW_MAX_RAM_BLOCKS] = { 0 };
	struct gw_vm_info want = { .size = sizeof(want), .nr_blocks = h->nr_blocks, .blocks = blocks,
				   .kvm_vm_fd = -1, .nr_vcpus = h->nr_vcpus, .kvm_dirty_ring_full_efd = -1,
				   .cpu_profile = h->profile_bytes ? h->profile : NULL,
				   .cpu_profile_bytes = h->profile_bytes };
	struct gw_vm_info got = s->vm;	/* what the VMM leaves alone stays as given at creation */
	char reason[200] = "", esc[GW_LOG_STR_MAX(200)];
	int ret;

	for (unsigned i = 0; i < h->nr_blocks; i++) {
		struct gw_ram_block *b = &blocks[i];

		memcpy(b->name, h->blocks[i].name, GW_RAM_NAME_MAX);
		b->gpa = h->blocks[i].gpa;
		b->size_bytes = h->blocks[i].size_bytes;
		b->page_size_bytes = h->blocks[i].page_size_bytes;
		b->fd = (h->flags & GW_HELLO_LOCAL) && (int)i < nr_fds ? fds[i] : -1;
	}
	if (!s->ops->setup_ram) {
		for (int i = 0; i < nr_fds; i++)
			close(fds[i]);
		if (layout_compare(s, &want, why, why_len))
			return 1;
		return layout_build(s, &want);
	}
	/* The VMM owns the fds now, whatever it answers; a refusal commits nothing. */
	ret = s->ops->setup_ram(s->opaque, &want, &got, reason, sizeof(reason));
	if (ret) {
		/* The VMM's words may quote the source's block names: escaped as the peer's. */
		snprintf(why, why_len, "%s%s", reason[0] ? "" : "this destination's VMM refused the source's "
			 "RAM layout: ", reason[0] ? gw_log_str(esc, sizeof(esc), reason) : strerror(-ret));
		return 1;
	}
	/* What the VMM built, in its struct's size, becomes the session's layout. */
	if (gw_session_take_vm_info(s, &got))
		return gw_fail(s, GW_PHASE_SETUP, -EINVAL, "the VMM's setup_ram filled a bad gw_vm_info (size %u)",
			       got.size);
	return layout_build(s, &want);
}

/* HELLO_ACK, or (testing) a frame whose header is garbage. */
static int send_hello_ack(struct gw_session *s, const struct gw_msg_hello *h)
{
	struct gw_msg_hello_ack ack = { .version = GW_WIRE_VERSION, .flags = h->flags };

	memcpy(ack.boot_id, s->boot_id, sizeof(ack.boot_id));
	memcpy(ack.challenge, s->challenge, sizeof(ack.challenge));

	if (GW_FAULT_DUE(s, GW_FAULT_DST_BAD_FRAME, 0)) {
		static const uint8_t junk[GW_WIRE_HDR_BYTES + 8] = "this is not a godwit frame!!!!!";

		return write(s->ctl.fd, junk, sizeof(junk)) < 0 ? -errno : 0;
	}
	return gw_conn_send_msg(&s->ctl, GW_MSG_HELLO_ACK, &ack);
}

/* What the statistics say of the migration as announced: RAM size, codec asked for. */
static void publish_layout(struct gw_session *s, const struct gw_msg_hello *h)
{
	enum gw_codec_id codec = GW_CODEC_NONE;
	uint64_t total = 0;

	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		total += s->vm.blocks[i].size_bytes;
	gw_wire_codec_to_id(h->codec, &codec);
	pthread_mutex_lock(&s->lock);
	s->stats.ram_total_bytes = total;
	snprintf(s->stats.codec, sizeof(s->stats.codec), "%s", gw_codec_name(codec));
	pthread_mutex_unlock(&s->lock);
}

/*
 * A HELLO refused before anything was committed: ERROR on its connection;
 * the destination waits on. @why is safe text (the peer's names in it
 * escaped where they were formatted); the line is under the acceptor's
 * rate limit, as every line a stranger can cause.
 */
static int hello_refused(struct gw_session *s, struct gw_admitted *c, int code, const char *why)
{
	char reason[GW_WIRE_MAX_REASON];

	snprintf(reason, sizeof(reason), "refused before any RAM was sent: %s", why);
	if (gw_admit_log_allow(s->adm, "hello_refused"))
		gw_log(GW_LOG_WARN, "mig", "hello_refused", "peer=\"%s\" code=%d reason=\"%s\"", c->peer, code,
		       why);
	if (c->fd >= 0) {
		gw_admitted_refuse(c, code, reason);
	} else {	/* taken over already: it is s->ctl */
		gw_conn_send_error(&s->ctl, code, reason);
		gw_conn_close(&s->ctl);
		gw_admitted_release(c);
	}
	return 1;
}

/* The source's TLS session, in the log and the statistics. */
static void note_tls(struct gw_session *s, const char *peer)
{
	struct gw_tls_info ti;

	if (!s->ctl.tls)
		return;
	gw_tls_info(s->ctl.tls, &ti);
	gw_log(GW_LOG_INFO, "mig", "tls_handshake", "conn=control peer=\"%s\" mode=%s version=%s cipher=%s "
	       "ktls_tx=%d ktls_rx=%d records=%s", peer, ti.mode, ti.version, ti.cipher, ti.ktls_tx, ti.ktls_rx,
	       ti.records);
	pthread_mutex_lock(&s->lock);
	snprintf(s->stats.tls, sizeof(s->stats.tls), "%s", ti.mode);
	gw_log_str(s->stats.tls_peer, sizeof(s->stats.tls_peer), gw_tls_peer(s->ctl.tls));	/* the CN: its bytes */
	snprintf(s->stats.tls_cipher, sizeof(s->stats.tls_cipher), "%s", ti.cipher);
	s->stats.ktls_tx = ti.ktls_tx;
	s->stats.ktls_rx = ti.ktls_rx;
	snprintf(s->stats.tls_records, sizeof(s->stats.tls_records), "%s", ti.records);
	pthread_mutex_unlock(&s->lock);
}

/* Accepted: from here the migration is this source's; strangers get BUSY. */
static int hello_commit(struct gw_session *s, struct gw_admitted *c, const struct gw_msg_hello *h)
{
	char holder[GW_ADMIT_PEER_MAX + 64];
	int ret;

	snprintf(holder, sizeof(holder), "%s (migration %02x%02x%02x%02x)", c->peer, h->id[0], h->id[1],
		 h->id[2], h->id[3]);
	if (getrandom(s->challenge, sizeof(s->challenge), 0) != sizeof(s->challenge))
		return gw_fail(s, GW_PHASE_SETUP, -EIO, "no random bytes for the migration's challenge");
	gw_admit_hold(s->adm, h->id, s->challenge, c->identity, holder);
	snprintf(s->dst->src_identity, sizeof(s->dst->src_identity), "%s", c->identity);
	snprintf(s->dst->src_holder, sizeof(s->dst->src_holder), "%s", holder);
	gw_set_status(s, GW_STATUS_SETUP);
	pthread_mutex_lock(&s->lock);
	s->t_start_ns = gw_now_ns();
	pthread_mutex_unlock(&s->lock);
	dst_progress(s);
	note_tls(s, c->peer);
	/* Verification: RAM registered for the snapshot at resume, protected ahead during precopy. */
	s->dst->snap_err = 0;
	if ((h->flags & GW_HELLO_VERIFY) && !(h->flags & GW_HELLO_LOCAL)) {
		s->dst->snap_err = gw_snapshot_new(&s->vm, &s->snap);
		if (s->dst->snap_err)
			gw_log(GW_LOG_WARN, "mig", "snapshot_unavailable", "err=\"%s\"", strerror(-s->dst->snap_err));
	}
	ret = send_hello_ack(s, h);
	if (ret)
		return gw_fail(s, GW_PHASE_SETUP, ret, "sending HELLO_ACK: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "mig", "handshake_done", "peer=\"%s\" channels=%u codec=%u flags=0x%x blocks=%u tls=%s",
	       c->peer, s->nr_channels, h->codec, h->flags, h->nr_blocks,
	       s->tls_ctx ? gw_tls_ctx_mode(s->tls_ctx) : "none");
	publish_layout(s, h);
	return 0;
}

/*
 * One admitted HELLO. 0: it holds the destination now; 1: refused on its
 * own connection, wait for another; or the sticky error (committed).
 */
static int hello_try(struct gw_session *s, struct gw_admitted *c, struct gw_msg_hello *h)
{
	int fds[GW_MAX_RAM_BLOCKS], nr_fds = 0, ret;
	char why[300] = "";

	ret = gw_msg_decode(GW_MSG_HELLO, c->payload, c->len, h, why, sizeof(why));
	if (!ret)
		ret = hello_acceptable(s, h, why, sizeof(why));
	if (ret)
		return hello_refused(s, c, ret, why);
	/* The control connection from here on (FDS follow on it). */
	gw_conn_adopt(&s->ctl, c->fd, c->sock, c->tls, 1);
	c->fd = -1;
	c->tls = NULL;
	/*
	 * A HELLO left behind by a source that gave up (its FIN is queued)
	 * must not take the destination: the real source may be next.
	 */
	if (gw_conn_peer_alive(&s->ctl))
		return hello_refused(s, c, -ECONNRESET, "the source closed the connection before it was answered");
	gw_conn_set_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	memcpy(s->mig_id, h->id, sizeof(s->mig_id));
	s->dst->hello_flags = h->flags;
	s->nr_channels = (h->flags & GW_HELLO_LOCAL) ? 0 : h->nr_channels;
	if (h->flags & GW_HELLO_LOCAL) {
		ret = recv_fds(s, h, fds, &nr_fds, why, sizeof(why));
		if (ret)
			return hello_refused(s, c, ret, why);
	}
	ret = setup_layout(s, h, fds, nr_fds, why, sizeof(why));
	if (ret == 1)
		return hello_refused(s, c, -ERANGE, why);
	if (!ret)
		ret = hello_commit(s, c, h);
	gw_admitted_release(c);
	return ret;
}

int dst_handshake(struct gw_session *s)
{
	struct gw_msg_hello *h = malloc(sizeof(*h));
	int ret = h ? 1 : gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory");

	while (ret == 1) {
		struct gw_admitted c;

		ret = gw_admit_take(s->adm, GW_MSG_HELLO, 0, &c);
		if (ret) {
			ret = gw_failed(s) ? gw_failed(s) : gw_fail(s, GW_PHASE_SETUP, ret, "waiting for a source: %s",
								       strerror(-ret));
			break;
		}
		ret = hello_try(s, &c, h);
	}
	free(h);
	return ret;
}

/*
 * Receives of a connection of this migration: frames within the I/O
 * timeout, idle while the migration progresses. Progress is pages, and the
 * steps that end a precopy (dst_progress): a frame as such, a PING or an
 * EXTENTS, is none, so a source that sends nothing else stalls.
 */
void dst_conn_watch(struct gw_session *s, struct gw_conn *c)
{
	gw_conn_set_timeout(c, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	gw_conn_wait_progress(c, &s->rx_progress_ns);
}

void dst_progress(struct gw_session *s)
{
	__atomic_store_n(&s->rx_progress_ns, gw_now_ns(), __ATOMIC_RELAXED);
}

/*
 * One data connection (the acceptor checked the migration id and the
 * identity): a free index. The index, or the sticky error.
 */
static int admit_channel(struct gw_session *s, struct gw_admitted *c)
{
	struct gw_msg_chan_hello m;
	unsigned idx;

	if (gw_msg_decode(GW_MSG_CHAN_HELLO, c->payload, c->len, &m, NULL, 0) ||
	    m.index >= s->nr_channels || s->chans[m.index].conn.fd >= 0) {
		gw_admitted_refuse(c, -EPROTO, "channel index invalid or repeated");
		return gw_fail(s, GW_PHASE_SETUP, -EPROTO, "a data connection with an invalid or repeated index");
	}
	idx = m.index;
	gw_conn_adopt(&s->chans[idx].conn, c->fd, c->sock, c->tls, 1);
	c->fd = -1;
	c->tls = NULL;
	/* The CHAN_HELLO counts among the channel's bytes, as on the source. */
	__atomic_store_n(&s->chans[idx].conn.bytes_recv, GW_WIRE_HDR_BYTES + (uint64_t)c->len, __ATOMIC_RELAXED);
	gw_admitted_release(c);
	dst_conn_watch(s, &s->chans[idx].conn);
	return (int)idx;
}

/*
 * Each block's write path, before the first page arrives. Asking the page
 * tables costs 4-5 ms per GiB mapped here: done after the channels are
 * acknowledged, it runs while the source starts its dirty tracking, not
 * while it waits for HELLO_ACK or a CHAN_ACK.
 */
static void choose_write_paths(struct gw_session *s)
{
	int pm = gw_pagemap_open();

	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];
		struct gw_dst_block *db = &s->dst->dblk[i];
		char name[GW_LOG_STR_MAX(GW_RAM_NAME_MAX)];	/* the source's name, with a setup_ram VMM */

		/*
		 * Not with postcopy allowed: the populate thread unmaps the
		 * RAM ahead of a switch (userfaultfd then places every page
		 * once), and writes through the mapping would fault it back.
		 */
		db->map_write = db->fd >= 0 && gw_param(s, GW_PARAM_RECV_PATH) == GW_RECV_AUTO &&
				!(s->dst->hello_flags & GW_HELLO_POSTCOPY) && block_mapped(b, pm);
		gw_log(GW_LOG_INFO, "mig", "block_write_path", "block=\"%s\" path=%s",
		       gw_log_str(name, sizeof(name), b->name), db->fd < 0 || db->map_write ? "mapping" : "file");
	}
	if (pm >= 0)
		close(pm);
}

int dst_accept_channels(struct gw_session *s)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	int ret = gw_channels_create(s, s->nr_channels);

	for (unsigned joined = 0; !ret && joined < s->nr_channels; joined++) {
		struct gw_admitted c;
		struct gw_msg_chan_ack ack;
		int idx;

		ret = gw_admit_take(s->adm, GW_MSG_CHAN_HELLO, gw_now_ns() + timeout_ms * 1000000ull, &c);
		if (ret)
			return gw_failed(s) ? gw_failed(s) :
			       gw_fail(s, GW_PHASE_SETUP, ret, "waiting for data connection %u of %u: %s",
				       joined + 1, s->nr_channels, strerror(-ret));
		idx = admit_channel(s, &c);
		if (idx < 0)
			return idx;
		ack.index = (uint32_t)idx;
		ret = gw_conn_send_msg(&s->chans[idx].conn, GW_MSG_CHAN_ACK, &ack);
		if (ret)
			return gw_fail(s, GW_PHASE_SETUP, ret, "channel %d ack", idx);
	}
	if (ret)
		return ret;
	choose_write_paths(s);
	return gw_channels_start(s, gw_channel_recv_main);
}

void dst_layout_release(struct gw_session *s)
{
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		gw_bitmap_free(&s->dst->dblk[i].written);
		gw_bitmap_free(&s->dst->dblk[i].stale);
	}
}
