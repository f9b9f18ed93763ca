/* SPDX-License-Identifier: MIT */
/*
 * Admission on the destination: the control connection (the first one to
 * open with a valid HELLO), the RAM layout, the data connections.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "channel.h"
#include "codec/codec.h"
#include "dest.h"
#include "postcopy.h"
#include "mem/mapped.h"

/*
 * The first connection that opens with a HELLO frame. Anything else is
 * answered with an ERROR and dropped; the destination keeps waiting.
 * Returns the payload length in @buf, or the sticky error.
 */
static ssize_t accept_hello(struct gw_session *s, uint8_t *buf, size_t cap)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);

	for (;;) {
		struct gw_frame_hdr h;
		ssize_t n;
		int fd = gw_accept_timeout(s->url.ops->sock, s->listen_fd, UINT32_MAX);

		if (fd < 0)
			return gw_fail(s, "setup", fd, false, "accepting the source: %s", strerror(-fd));
		gw_conn_set_fd(&s->ctl, fd, s->url.ops->sock);
		gw_conn_set_timeout(&s->ctl, timeout_ms);
		n = gw_conn_recv(&s->ctl, &h, buf, cap, NULL, 0, NULL);
		if (n >= 0 && h.type == GW_MSG_HELLO)
			return n;
		gw_log(GW_LOG_WARN, "mig", "conn_refused", "reason=\"%s\"",
		       n < 0 ? gw_conn_err_text((int)n, "source") : "first frame is not HELLO");
		gw_conn_send_error(&s->ctl, n < 0 ? (int)n : -EPROTO,
				   n == -EBADMSG ? "checksum mismatch" : "expected a HELLO frame");
		gw_conn_close(&s->ctl);
	}
}

/* What this destination can do with a decoded HELLO: 0, or -errno with @why. */
static int hello_acceptable(const struct gw_session *s, const struct gw_msg_hello *h,
			    char *why, size_t why_len)
{
	enum gw_codec_id codec;

	if (h->min_version > GW_WIRE_VERSION || h->max_version < GW_WIRE_VERSION) {
		snprintf(why, why_len, "no common protocol version (source %u..%u, destination %u)",
			 h->min_version, h->max_version, GW_WIRE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (gw_wire_codec_to_id(h->codec, &codec) ||
	    (codec != GW_CODEC_AUTO && codec != GW_CODEC_NONE && !gw_codec_get(codec))) {
		snprintf(why, why_len, "codec %u not available here", h->codec);
		return -EOPNOTSUPP;
	}
	if ((h->flags & GW_HELLO_LOCAL) && !s->url.ops->can_pass_fds) {
		snprintf(why, why_len, "local migration over %s", s->url.ops->scheme);
		return -EPROTO;
	}
	if ((h->flags & GW_HELLO_POSTCOPY) && ((h->flags & GW_HELLO_LOCAL) || h->nr_channels >= GW_WIRE_MAX_CHANNELS)) {
		snprintf(why, why_len, "postcopy with local migration or %u channels", h->nr_channels);
		return -EPROTO;
	}
	if ((h->flags & GW_HELLO_POSTCOPY) && !s->ops->postcopy_ram) {
		/* A VMM without it cannot be told RAM is incomplete. */
		snprintf(why, why_len, "postcopy: this destination's VMM does not support it (no postcopy_ram callback)");
		return -EOPNOTSUPP;
	}
	if (h->flags & GW_HELLO_POSTCOPY)
		return dst_pc_probe(why, why_len);
	return 0;
}

/* Local migration: the FDS message with one descriptor per block. */
static int recv_fds(struct gw_session *s, const struct gw_msg_hello *h, int *fds, int *nr_fds)
{
	uint8_t buf[4 + GW_MAX_RAM_BLOCKS * 4];
	union gw_msg m;
	int type = gw_conn_recv_msg_fds(&s->ctl, &m, buf, sizeof(buf), fds, GW_MAX_RAM_BLOCKS,
					nr_fds, NULL, 0);

	if (type != GW_MSG_FDS || *nr_fds != (int)h->nr_blocks || m.fds.count != h->nr_blocks) {
		for (int i = 0; i < *nr_fds; i++)
			close(fds[i]);
		*nr_fds = 0;
		return gw_fail(s, "setup", -EPROTO, false, "expected FDS with %u descriptors", h->nr_blocks);
	}
	return 0;
}

/* Without a setup_ram callback: the layout given at creation must be the announced one. */
static int layout_compare(struct gw_session *s, const struct gw_vm_info *want)
{
	if (s->vm.nr_blocks != want->nr_blocks)
		return gw_fail(s, "setup", -ERANGE, false, "RAM layout refused: %u blocks, expected %u",
			       want->nr_blocks, s->vm.nr_blocks);
	for (unsigned i = 0; i < want->nr_blocks; i++)
		if (strcmp(s->vm.blocks[i].name, want->blocks[i].name) ||
		    s->vm.blocks[i].size_bytes != want->blocks[i].size_bytes)
			return gw_fail(s, "setup", -ERANGE, false,
				       "RAM layout refused: block %s of %llu bytes, destination has %s of %llu",
				       want->blocks[i].name, (unsigned long long)want->blocks[i].size_bytes,
				       s->vm.blocks[i].name, (unsigned long long)s->vm.blocks[i].size_bytes);
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

/* The receive layout over the blocks the VMM built. */
static int layout_build(struct gw_session *s, const struct gw_vm_info *want)
{
	int pm = gw_pagemap_open();
	int ret = 0;

	if (s->vm.nr_blocks != want->nr_blocks)
		return gw_fail(s, "setup", -ERANGE, false, "RAM layout refused by the VMM");
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];
		struct gw_dst_block *db = &s->dblk[i];

		if (!b->host || b->size_bytes != want->blocks[i].size_bytes || b->page_size_bytes != GW_PAGE_BYTES) {
			ret = gw_fail(s, "setup", -ERANGE, false, "VMM built block %s wrongly", b->name);
			break;
		}
		db->host = b->host;
		db->fd = (s->hello_flags & GW_HELLO_LOCAL) ? -1 : b->fd;
		db->fd_offset_bytes = b->fd_offset_bytes;
		db->nr_pages = b->size_bytes / GW_PAGE_BYTES;
		/*
		 * Not with postcopy allowed: the populate thread unmaps the
		 * RAM ahead of a switch (userfaultfd then places every page
		 * once), and writes through the mapping would fault it back.
		 */
		db->map_write = db->fd >= 0 && gw_param(s, GW_PARAM_RECV_PATH) == GW_RECV_AUTO &&
				!(s->hello_flags & GW_HELLO_POSTCOPY) && block_mapped(b, pm);
		if (gw_bitmap_init(&db->written, db->nr_pages) || gw_bitmap_init(&db->stale, db->nr_pages)) {
			ret = gw_fail(s, "setup", -ENOMEM, false, "no memory for bitmaps");
			break;
		}
		gw_log(GW_LOG_INFO, "mig", "block_write_path", "block=%s path=%s", b->name,
		       db->fd < 0 || db->map_write ? "mapping" : "file");
	}
	if (pm >= 0)
		close(pm);
	if (ret)
		return ret;
	s->layout = (struct gw_dst_layout){ .nr_blocks = s->vm.nr_blocks, .blocks = s->dblk,
					    .xbzrle = (s->hello_flags & GW_HELLO_XBZRLE) != 0 };
	return 0;
}

/* Compare the announced layout with ours, or let the VMM build it. Takes the fds. */
static int setup_layout(struct gw_session *s, const struct gw_msg_hello *h, int *fds, int nr_fds)
{
	struct gw_vm_info want = { .nr_blocks = h->nr_blocks, .kvm_vm_fd = -1 };
	char reason[200] = "";
	int ret;

	for (unsigned i = 0; i < h->nr_blocks; i++) {
		struct gw_ram_block *b = &want.blocks[i];

		memcpy(b->name, h->blocks[i].name, GW_RAM_NAME_MAX);
		b->gpa = h->blocks[i].gpa;
		b->size_bytes = h->blocks[i].size_bytes;
		b->page_size_bytes = h->blocks[i].page_size_bytes;
		b->fd = (h->flags & GW_HELLO_LOCAL) && (int)i < nr_fds ? fds[i] : -1;
	}
	if (!s->ops->setup_ram) {
		for (int i = 0; i < nr_fds; i++)
			close(fds[i]);
		ret = layout_compare(s, &want);
		return ret ? ret : layout_build(s, &want);
	}
	/* The VMM owns the fds now, whatever it answers. */
	ret = s->ops->setup_ram(s->opaque, &want, &s->vm, reason, sizeof(reason));
	if (ret)
		return gw_fail(s, "setup", -ERANGE, false, "RAM layout refused: %s",
			       reason[0] ? reason : strerror(-ret));
	return layout_build(s, &want);
}

/* HELLO_ACK, or (testing) a frame whose header is garbage. */
static int send_hello_ack(struct gw_session *s, const struct gw_msg_hello *h)
{
	struct gw_msg_hello_ack ack = { .version = GW_WIRE_VERSION, .flags = h->flags };

	memcpy(ack.boot_id, s->boot_id, sizeof(ack.boot_id));

	if (gw_fault_armed(s, GW_FAULT_DST_BAD_FRAME)) {
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

static int hello_apply(struct gw_session *s, struct gw_msg_hello *h)
{
	int fds[GW_MAX_RAM_BLOCKS], nr_fds = 0, ret;

	memcpy(s->mig_id, h->id, sizeof(s->mig_id));
	s->hello_flags = h->flags;
	s->nr_channels = (h->flags & GW_HELLO_LOCAL) ? 0 : h->nr_channels;
	if (h->flags & GW_HELLO_LOCAL) {
		ret = recv_fds(s, h, fds, &nr_fds);
		if (ret)
			return ret;
	}
	ret = setup_layout(s, h, fds, nr_fds);
	if (ret)
		return ret;
	/* Verification: RAM registered for the snapshot at resume, protected ahead during precopy. */
	s->snap_err = 0;
	if ((h->flags & GW_HELLO_VERIFY) && !(h->flags & GW_HELLO_LOCAL)) {
		s->snap_err = gw_snapshot_new(&s->vm, &s->snap);
		if (s->snap_err)
			gw_log(GW_LOG_WARN, "mig", "snapshot_unavailable", "err=\"%s\"", strerror(-s->snap_err));
	}
	ret = send_hello_ack(s, h);
	if (ret)
		return gw_fail(s, "setup", ret, false, "sending HELLO_ACK: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "mig", "handshake_done", "channels=%u codec=%u flags=0x%x blocks=%u",
	       s->nr_channels, h->codec, h->flags, h->nr_blocks);
	publish_layout(s, h);
	return 0;
}

int dst_handshake(struct gw_session *s)
{
	size_t cap = gw_frame_max_payload(GW_MSG_HELLO);
	uint8_t *buf = malloc(cap);
	struct gw_msg_hello *h = malloc(sizeof(*h));
	char why[200] = "";
	ssize_t n;
	int ret;

	if (!buf || !h) {
		ret = gw_fail(s, "setup", -ENOMEM, false, "no memory");
		goto out;
	}
	n = accept_hello(s, buf, cap);
	if (n < 0) {
		ret = (int)n;
		goto out;
	}
	gw_set_status(s, GW_STATUS_SETUP);
	pthread_mutex_lock(&s->lock);
	s->t_start_ns = gw_now_ns();
	pthread_mutex_unlock(&s->lock);
	ret = gw_msg_decode(GW_MSG_HELLO, buf, (size_t)n, h, why, sizeof(why));
	if (!ret)
		ret = hello_acceptable(s, h, why, sizeof(why));
	ret = ret ? gw_fail(s, "setup", ret, false, "HELLO refused: %s", why) : hello_apply(s, h);
out:
	free(buf);
	free(h);
	return ret;
}

/*
 * One data connection: CHAN_HELLO with our migration id and a free index.
 * Returns the index, -EAGAIN for a stranger (refused, keep waiting), or the
 * sticky error.
 */
static int admit_channel(struct gw_session *s, int fd, uint64_t timeout_ms)
{
	uint8_t buf[GW_WIRE_ID_BYTES + 4];
	struct gw_conn tmp;
	union gw_msg m;
	int type;

	gw_conn_init(&tmp, -1);
	gw_conn_set_fd(&tmp, fd, s->url.ops->sock);
	gw_conn_set_timeout(&tmp, timeout_ms);
	type = gw_conn_recv_msg(&tmp, &m, buf, sizeof(buf), NULL, 0);
	if (type != GW_MSG_CHAN_HELLO || memcmp(m.chan_hello.id, s->mig_id, GW_WIRE_ID_BYTES)) {
		gw_log(GW_LOG_WARN, "mig", "conn_refused", "reason=\"not a data connection of this migration\"");
		gw_conn_send_error(&tmp, -EACCES, type != GW_MSG_CHAN_HELLO ? "expected CHAN_HELLO" :
				   "unknown migration id");
		gw_conn_close(&tmp);
		return -EAGAIN;
	}
	if (m.chan_hello.index >= s->nr_channels || s->chans[m.chan_hello.index].conn.fd >= 0) {
		gw_conn_send_error(&tmp, -EPROTO, "channel index invalid or repeated");
		gw_conn_close(&tmp);
		return gw_fail(s, "setup", -EPROTO, false, "channel index %u invalid or repeated",
			       m.chan_hello.index);
	}
	gw_conn_set_fd(&s->chans[m.chan_hello.index].conn, fd, s->url.ops->sock);
	s->chans[m.chan_hello.index].conn.recv_seq = tmp.recv_seq;
	/* The CHAN_HELLO counts among the channel's bytes, as on the source. */
	__atomic_store_n(&s->chans[m.chan_hello.index].conn.bytes_recv, tmp.bytes_recv, __ATOMIC_RELAXED);
	return (int)m.chan_hello.index;
}

int dst_accept_channels(struct gw_session *s)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	int ret = gw_channels_create(s, s->nr_channels);

	for (unsigned joined = 0; !ret && joined < s->nr_channels;) {
		int fd = gw_accept_timeout(s->url.ops->sock, s->listen_fd, timeout_ms), idx;
		struct gw_msg_chan_ack ack;

		if (fd < 0)
			return gw_fail(s, "setup", fd, false, "waiting for data connection %u of %u: %s",
				       joined + 1, s->nr_channels, strerror(-fd));
		idx = admit_channel(s, fd, timeout_ms);
		if (idx == -EAGAIN)
			continue;
		if (idx < 0)
			return idx;
		/* Receives block as long as the source is alive: no receive timeout. */
		gw_conn_set_recv_timeout(&s->chans[idx].conn, 0);
		ack.index = (uint32_t)idx;
		ret = gw_conn_send_msg(&s->chans[idx].conn, GW_MSG_CHAN_ACK, &ack);
		if (ret)
			return gw_fail(s, "setup", ret, false, "channel %d ack", idx);
		joined++;
	}
	return ret ? ret : gw_channels_start(s, gw_channel_recv_main);
}

void dst_layout_release(struct gw_session *s)
{
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		gw_bitmap_free(&s->dblk[i].written);
		gw_bitmap_free(&s->dblk[i].stale);
	}
}
