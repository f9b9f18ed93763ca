/* SPDX-License-Identifier: MIT */
/*
 * Destination side of a migration (the migration thread). Everything it
 * receives is hostile: frames are checked by io.c/wire.c, page offsets by
 * channel.c against the layout agreed in HELLO. The VM is resumed only on
 * GO, after READY; on any failure what was received is discarded and the
 * VM never runs here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "channel.h"
#include "codec/codec.h"
#include "mem/digest.h"
#include "session_int.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Extents to pre-populate, handed from the migration thread to the populate thread. */
struct populate_job {
	struct gw_session *s;
	size_t nr;			/* bounded by on_extents */
	struct { unsigned block; uint64_t first, count; } *ext;
};

/*
 * Pre-populate what the stream will fill, ahead of it and off the critical
 * path: writes into never-touched pages cost a page fault each.
 */
static void *populate_main(void *arg)
{
	struct populate_job *job = arg;
	struct gw_session *s = job->s;
	uint64_t t0 = gw_now_ns(), pages = 0;

	gw_log_set_side(s->side);
	for (size_t i = 0; i < job->nr && !gw_failed(s); i++) {
		const struct gw_dst_block *db = &s->dblk[job->ext[i].block];
		uint8_t *host = db->host;
		uint64_t done = 0;

		/* In 64 MiB steps so that a failure stops it soon. */
		while (done < job->ext[i].count && !gw_failed(s)) {
			uint64_t n = job->ext[i].count - done;

			if (n > 16384)
				n = 16384;
			/* fd-backed RAM is written with pwrite: allocate its pages; else fault them in. */
			if (db->fd >= 0 ?
			    fallocate(db->fd, 0, (off_t)(db->fd_offset_bytes + (job->ext[i].first + done) * 4096),
				      (off_t)(n * 4096)) :
			    madvise(host + (job->ext[i].first + done) * 4096, n * 4096, MADV_POPULATE_WRITE))
				break;	/* best effort: the stream will allocate pages itself */
			done += n;
		}
		pages += done;
	}
	gw_log(GW_LOG_INFO, "mem", "prepopulate_done", "pages=%llu duration_us=%llu",
	       (unsigned long long)pages, (unsigned long long)((gw_now_ns() - t0) / 1000));
	free(job->ext);
	free(job);
	return NULL;
}

static int on_extents(struct gw_session *s, const uint8_t *buf, size_t len)
{
	struct gw_rbuf r;
	uint32_t block, count;
	struct populate_job *job = s->pop_job;

	gw_rbuf_init(&r, buf, len);
	block = gw_get_le32(&r);
	count = gw_get_le32(&r);
	if (r.underrun || block >= s->vm.nr_blocks || count > GW_WIRE_MAX_EXTENTS)
		return -EPROTO;
	/* Hints come before round 0, and never more than one per page pair. */
	if (s->stats.rounds || (job && job->nr + (uint64_t)count > s->dblk[block].nr_pages / 2 + GW_WIRE_MAX_EXTENTS))
		return -EPROTO;
	if (!job) {
		job = calloc(1, sizeof(*job));
		if (!job)
			return -ENOMEM;
		job->s = s;
		s->pop_job = job;
	}
	void *ext = realloc(job->ext, ((size_t)job->nr + count) * sizeof(*job->ext));
	if (!ext)
		return -ENOMEM;
	job->ext = ext;
	for (uint32_t i = 0; i < count; i++) {
		uint64_t first = gw_get_le64(&r), n = gw_get_le64(&r);

		if (r.underrun || first >= s->dblk[block].nr_pages || n > s->dblk[block].nr_pages - first)
			return -ERANGE;
		job->ext[job->nr].block = block;
		job->ext[job->nr].first = first;
		job->ext[job->nr].count = n;
		job->nr++;
	}
	return gw_rbuf_done(&r);
}

static void start_populate(struct gw_session *s)
{
	struct populate_job *job = s->pop_job;

	s->pop_job = NULL;
	if (!job)
		return;
	if (s->hello_flags & GW_HELLO_LOCAL ||
	    pthread_create(&s->populate_thread, NULL, populate_main, job)) {
		free(job->ext);
		free(job);
		return;
	}
	s->populate_running = true;
}

/* Compare the announced layout with ours, or let the VMM build it. */
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
	if (s->ops->setup_ram) {
		struct gw_vm_info vm = s->vm;

		ret = s->ops->setup_ram(s->opaque, &want, &vm, reason, sizeof(reason));
		/* The VMM owns the fds now, whatever it answered. */
		for (int i = 0; i < nr_fds; i++)
			fds[i] = -1;
		if (ret)
			return gw_fail(s, "setup", -ERANGE, false, "RAM layout refused: %s",
				       reason[0] ? reason : strerror(-ret));
		s->vm = vm;
	} else {
		if (s->vm.nr_blocks != want.nr_blocks)
			return gw_fail(s, "setup", -ERANGE, false, "RAM layout refused: %u blocks, expected %u",
				       want.nr_blocks, s->vm.nr_blocks);
		for (unsigned i = 0; i < want.nr_blocks; i++)
			if (strcmp(s->vm.blocks[i].name, want.blocks[i].name) ||
			    s->vm.blocks[i].size_bytes != want.blocks[i].size_bytes)
				return gw_fail(s, "setup", -ERANGE, false,
					       "RAM layout refused: block %s of %llu bytes, destination has %s of %llu",
					       want.blocks[i].name, (unsigned long long)want.blocks[i].size_bytes,
					       s->vm.blocks[i].name, (unsigned long long)s->vm.blocks[i].size_bytes);
	}
	if (s->vm.nr_blocks != want.nr_blocks)
		return gw_fail(s, "setup", -ERANGE, false, "RAM layout refused by the VMM");
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];

		if (!b->host || b->size_bytes != want.blocks[i].size_bytes || b->page_size_bytes != 4096)
			return gw_fail(s, "setup", -ERANGE, false, "VMM built block %s wrongly", b->name);
		s->dblk[i].host = b->host;
		s->dblk[i].fd = (s->hello_flags & GW_HELLO_LOCAL) ? -1 : b->fd;
		s->dblk[i].fd_offset_bytes = b->fd_offset_bytes;
		s->dblk[i].nr_pages = b->size_bytes / 4096;
		if (gw_bitmap_init(&s->dblk[i].written, s->dblk[i].nr_pages))
			return gw_fail(s, "setup", -ENOMEM, false, "no memory for bitmaps");
	}
	return 0;
}

/* Accept the data connections: only ones presenting our migration id. */
static int accept_channels(struct gw_session *s)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	unsigned joined = 0;

	int err = gw_channels_create(s, s->nr_channels);

	if (err)
		return err;
	while (joined < s->nr_channels) {
		uint8_t buf[GW_WIRE_ID_BYTES + 4];
		struct gw_frame_hdr h;
		struct gw_conn tmp;
		struct gw_rbuf r;
		ssize_t n;
		uint32_t idx;
		int fd = gw_accept_timeout(s->listen_fd, timeout_ms);

		if (fd < 0)
			return gw_fail(s, "setup", fd, false, "waiting for data connection %u of %u: %s",
				       joined + 1, s->nr_channels, strerror(-fd));
		gw_conn_init(&tmp, fd);
		gw_conn_set_timeout(&tmp, timeout_ms);
		n = gw_conn_recv(&tmp, &h, buf, sizeof(buf), NULL, 0, NULL);
		if (n < 0 || h.type != GW_MSG_CHAN_HELLO || n != sizeof(buf) ||
		    memcmp(buf, s->mig_id, GW_WIRE_ID_BYTES)) {
			gw_log(GW_LOG_WARN, "mig", "conn_refused",
			       "reason=\"not a data connection of this migration\"");
			gw_conn_send_error(&tmp, -EACCES, n < 0 || h.type != GW_MSG_CHAN_HELLO ?
					   "expected CHAN_HELLO" : "unknown migration id");
			gw_conn_close(&tmp);
			continue;
		}
		gw_rbuf_init(&r, buf + GW_WIRE_ID_BYTES, 4);
		idx = gw_get_le32(&r);
		if (idx >= s->nr_channels || s->chans[idx].conn.fd >= 0) {
			gw_conn_send_error(&tmp, -EPROTO, "channel index invalid or repeated");
			gw_conn_close(&tmp);
			return gw_fail(s, "setup", -EPROTO, false, "channel index %u invalid or repeated", idx);
		}
		int ret;

		gw_conn_set_fd(&s->chans[idx].conn, fd);
		s->chans[idx].conn.recv_seq = tmp.recv_seq;
		/* Receives block as long as the source is alive: no receive timeout. */
		gw_conn_set_recv_timeout(&s->chans[idx].conn, 0);
		uint8_t ack[4] = { (uint8_t)idx, (uint8_t)(idx >> 8), 0, 0 };
		ret = gw_conn_send_buf(&s->chans[idx].conn, GW_MSG_CHAN_ACK, ack, sizeof(ack));
		if (ret)
			return gw_fail(s, "setup", ret, false, "channel %u ack", idx);
		joined++;
	}
	return gw_channels_start(s, gw_channel_recv_main);
}

static int handshake(struct gw_session *s, struct gw_msg_hello *hello)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	uint8_t *buf = malloc(gw_wire_max_payload(GW_MSG_HELLO) + 16);
	int fds[GW_MAX_RAM_BLOCKS], nr_fds = 0;
	char why[200] = "";
	struct gw_frame_hdr h;
	ssize_t n;
	int fd, ret;

	if (!buf)
		return gw_fail(s, "setup", -ENOMEM, false, "no memory");
	/*
	 * No timeout on the first connection: the destination waits for a
	 * source. A connection that does not open with a valid HELLO frame is
	 * answered with an ERROR and dropped; the destination keeps waiting.
	 */
	for (;;) {
		fd = gw_accept_timeout(s->listen_fd, UINT32_MAX);
		if (fd < 0) {
			free(buf);
			return gw_fail(s, "setup", fd, false, "accepting the source: %s", strerror(-fd));
		}
		gw_conn_set_fd(&s->ctl, fd);
		gw_conn_set_timeout(&s->ctl, timeout_ms);
		n = gw_conn_recv(&s->ctl, &h, buf, gw_wire_max_payload(GW_MSG_HELLO), NULL, 0, NULL);
		if (n >= 0 && h.type == GW_MSG_HELLO)
			break;
		gw_log(GW_LOG_WARN, "mig", "conn_refused", "reason=\"%s\"",
		       n < 0 ? strerror((int)-n) : "first frame is not HELLO");
		gw_conn_send_error(&s->ctl, n < 0 ? (int)n : -EPROTO,
				   n == -EBADMSG ? "checksum mismatch" : "expected a HELLO frame");
		gw_conn_close(&s->ctl);
	}
	gw_set_status(s, GW_STATUS_SETUP);
	s->t_start_ns = gw_now_ns();
	ret = gw_msg_hello_decode(buf, (size_t)n, hello, why, sizeof(why));
	if (!ret && (hello->min_version > GW_WIRE_VERSION || hello->max_version < GW_WIRE_VERSION))
		ret = -EPROTONOSUPPORT, snprintf(why, sizeof(why), "no common protocol version (source %u..%u, destination %u)",
						 hello->min_version, hello->max_version, GW_WIRE_VERSION);
	if (!ret && hello->codec != 0 && hello->codec != 5 && !gw_codec_get((enum gw_codec_id)hello->codec))
		ret = -EOPNOTSUPP, snprintf(why, sizeof(why), "codec %u not available here", hello->codec);
	if (!ret && (hello->flags & GW_HELLO_LOCAL) && !s->url.ops->can_pass_fds)
		ret = -EPROTO, snprintf(why, sizeof(why), "local migration over %s", s->url.ops->scheme);
	if (ret) {
		free(buf);
		return gw_fail(s, "setup", ret, false, "HELLO refused: %s", why);
	}
	memcpy(s->mig_id, hello->id, sizeof(s->mig_id));
	s->hello_flags = hello->flags;
	s->nr_channels = (hello->flags & GW_HELLO_LOCAL) ? 0 : hello->nr_channels;
	if (hello->flags & GW_HELLO_LOCAL) {
		n = gw_conn_recv(&s->ctl, &h, buf, 4 + GW_MAX_RAM_BLOCKS * 4, fds, GW_MAX_RAM_BLOCKS, &nr_fds);
		if (n < 0 || h.type != GW_MSG_FDS || nr_fds != (int)hello->nr_blocks) {
			for (int i = 0; i < nr_fds; i++)
				close(fds[i]);
			free(buf);
			return gw_fail(s, "setup", -EPROTO, false, "expected FDS with %u descriptors", hello->nr_blocks);
		}
	}
	free(buf);
	ret = setup_layout(s, hello, fds, nr_fds);
	for (int i = 0; i < nr_fds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (ret)
		return ret;
	uint8_t ack[8] = { GW_WIRE_VERSION, 0, 0, 0 };
	ack[4] = (uint8_t)hello->flags;
	ret = gw_fault_armed(s, GW_FAULT_DST_CORRUPT) ? 0 :
		gw_conn_send_buf(&s->ctl, GW_MSG_HELLO_ACK, ack, sizeof(ack));
	if (gw_fault_armed(s, GW_FAULT_DST_CORRUPT)) {
		/* Testing: a frame whose header is garbage. */
		static const uint8_t junk[GW_WIRE_HDR_BYTES + 8] = "this is not a godwit frame!!!!!";
		if (write(s->ctl.fd, junk, sizeof(junk)) < 0)
			ret = -errno;
	}
	if (ret)
		return gw_fail(s, "setup", ret, false, "sending HELLO_ACK: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "mig", "handshake_done", "channels=%u codec=%s flags=0x%x blocks=%u",
	       s->nr_channels, gw_codec_name((enum gw_codec_id)hello->codec), hello->flags, hello->nr_blocks);
	return 0;
}

/* Wait for every channel thread to see CHAN_END; check their totals. */
static int join_channels(struct gw_session *s, uint64_t total_pages)
{
	uint64_t pages = 0;

	for (unsigned i = 0; i < s->nr_channels; i++) {
		if (s->chans[i].thread_started)
			pthread_join(s->chans[i].thread, NULL);
		s->chans[i].thread_started = false;
	}
	if (gw_failed(s))
		return gw_failed(s);
	for (unsigned i = 0; i < s->nr_channels; i++) {
		if (!s->chans[i].end_requested)
			return gw_fail(s, "final", -EPROTO, false, "channel %u ended without CHAN_END", i);
		pages += s->chans[i].pages;
	}
	if (pages != total_pages)
		return gw_fail(s, "final", -EPROTO, false, "COMPLETE says %llu pages, channels received %llu",
			       (unsigned long long)total_pages, (unsigned long long)pages);
	return 0;
}

static int on_complete(struct gw_session *s, const uint8_t *buf, size_t len, struct gw_state *st,
		       bool have_state)
{
	struct gw_downtime_breakdown *bd = &s->stats.downtime;
	struct gw_digest mine = { 0, 0 }, theirs;
	uint64_t t0 = gw_now_ns(), verify_ns = 0, load_ns;
	uint32_t flags_out = 0;
	struct gw_rbuf r;
	int ret;

	gw_rbuf_init(&r, buf, len);
	uint32_t nr_channels = gw_get_le32(&r), flags = gw_get_le32(&r);
	theirs.lo = gw_get_le64(&r);
	theirs.hi = gw_get_le64(&r);
	uint64_t total_pages = gw_get_le64(&r);
	gw_get_le64(&r);
	if (gw_rbuf_done(&r) || nr_channels != s->nr_channels || (flags & ~GW_COMPLETE_DIGEST))
		return gw_fail(s, "final", -EPROTO, false, "malformed COMPLETE");
	if (!have_state)
		return gw_fail(s, "final", -EPROTO, false, "COMPLETE before STATE");
	ret = join_channels(s, total_pages);
	if (ret)
		return ret;
	gw_log(GW_LOG_INFO, "mig", "final_received", "pages=%llu",
	       (unsigned long long)(__atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
				    __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED)));
	gw_fault_maybe_die(s, GW_FAULT_DST_FINAL, 0);
	if (flags & GW_COMPLETE_DIGEST) {
		uint64_t t = gw_now_ns();

		struct gw_bitmap written[GW_MAX_RAM_BLOCKS];

		/* Pages this migration did not write are still the zero they started as. */
		for (unsigned i = 0; i < s->vm.nr_blocks; i++)
			written[i] = s->dblk[i].written;
		ret = (s->hello_flags & GW_HELLO_LOCAL) ? gw_ram_digest(&s->vm, 2, &mine) :
			gw_ram_digest_masked(&s->vm, 2, written, &mine);
		if (ret)
			return gw_fail(s, "final", ret, false, "RAM digest: %s", strerror(-ret));
		verify_ns = gw_now_ns() - t;
		if (mine.lo != theirs.lo || mine.hi != theirs.hi)
			return gw_fail(s, "final", -EILSEQ, false,
				       "RAM digest mismatch: source %016llx%016llx, destination %016llx%016llx",
				       (unsigned long long)theirs.hi, (unsigned long long)theirs.lo,
				       (unsigned long long)mine.hi, (unsigned long long)mine.lo);
		flags_out |= GW_READY_VERIFIED;
		gw_log(GW_LOG_INFO, "mig", "digest", "xxh3=%016llx%016llx match=1 verify_us=%llu",
		       (unsigned long long)mine.hi, (unsigned long long)mine.lo,
		       (unsigned long long)(verify_ns / 1000));
	}
	if (gw_fault_armed(s, GW_FAULT_DST_REJECT))
		return gw_fail(s, "final", -ENOEXEC, false, "device state refused: fault injection");
	ret = s->ops->load_state(s->opaque, st);
	if (ret)
		return gw_fail(s, "final", -ENOEXEC, false, "device state refused: %s",
			       st->reject_reason[0] ? st->reject_reason : strerror(-ret));
	load_ns = gw_now_ns() - t0 - verify_ns;
	bd->dst_load_ns = load_ns;
	bd->verify_ns = verify_ns;
	uint8_t out[24];
	struct gw_wbuf w;

	gw_wbuf_init(&w, out, sizeof(out));
	gw_put_le32(&w, flags_out);
	gw_put_le32(&w, 0);
	gw_put_le64(&w, load_ns);
	gw_put_le64(&w, verify_ns);
	ret = gw_conn_send_buf(&s->ctl, GW_MSG_READY, out, w.len);
	if (ret)
		return gw_fail(s, "handover", ret, false, "sending READY: %s", strerror(-ret));
	pthread_mutex_lock(&s->lock);
	s->stats.verified = (flags_out & GW_READY_VERIFIED) != 0;
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_INFO, "mig", "ready_sent", "verified=%d load_us=%llu",
	       !!(flags_out & GW_READY_VERIFIED), (unsigned long long)(load_ns / 1000));
	gw_fault_maybe_die(s, GW_FAULT_DST_AFTER_READY, 0);
	return 0;
}

/* After READY only GO (or ERROR) may come; then resume and answer RESUMED. */
static int wait_go_and_resume(struct gw_session *s)
{
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	struct gw_frame_hdr h;
	uint64_t t_go, go_to_resume_ns;
	ssize_t n;
	int ret;

	/* The source sends GO right after READY: a long silence means it is gone. */
	gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	n = gw_conn_recv(&s->ctl, &h, buf, sizeof(buf), NULL, 0, NULL);
	if (n < 0)
		return gw_fail(s, "handover", (int)n, false, "waiting for GO: %s",
			       n == -ECONNRESET ? "source closed the connection" : strerror((int)-n));
	if (h.type == GW_MSG_ERROR)
		return gw_fail_from_peer_frame(s, "handover", buf, (size_t)n);
	if (h.type != GW_MSG_GO || n != 0)
		return gw_fail(s, "handover", -EPROTO, false, "expected GO, got %s", gw_wire_type_name(h.type));
	t_go = gw_now_ns();
	gw_fault_maybe_die(s, GW_FAULT_DST_AFTER_GO, 0);
	ret = s->ops->resume(s->opaque);
	go_to_resume_ns = gw_now_ns() - t_go;
	gw_log(GW_LOG_INFO, "mig", "vm_resume", "where=destination ok=%d go_to_resume_us=%llu",
	       ret == 0, (unsigned long long)(go_to_resume_ns / 1000));
	if (ret)
		return gw_fail(s, "handover", ret, false, "resuming the VM failed: %s", strerror(-ret));
	uint64_t le = htole64(go_to_resume_ns);
	/* The VM runs here now: a lost RESUMED does not change that. */
	if (gw_conn_send_buf(&s->ctl, GW_MSG_RESUMED, &le, sizeof(le)))
		gw_log(GW_LOG_WARN, "mig", "resumed_not_sent", "reason=\"source gone after GO\"");
	return 0;
}

static int control_loop(struct gw_session *s)
{
	size_t cap = gw_wire_max_payload(GW_MSG_STATE) + 16;
	uint8_t *buf = malloc(cap);
	struct gw_state *st = calloc(1, sizeof(*st));
	bool have_state = false;
	int ret = 0;

	if (!buf || !st) {
		free(buf);
		free(st);
		return gw_fail(s, "receive", -ENOMEM, false, "no memory");
	}
	gw_state_init(st);
	/* No receive timeout during precopy: rounds can be long; liveness
	 * comes from the source's writes and TCP errors. */
	gw_conn_set_recv_timeout(&s->ctl, 0);
	for (;;) {
		struct gw_frame_hdr h;
		ssize_t n = gw_conn_recv(&s->ctl, &h, buf, cap, NULL, 0, NULL);

		if (n < 0) {
			ret = gw_failed(s) ? gw_failed(s) :
				gw_fail(s, "receive", (int)n, false, "control connection: %s",
					n == -ECONNRESET ? "source closed it" :
					n == -EBADMSG ? "checksum mismatch" :
					n == -EPROTO ? "malformed frame" : strerror((int)-n));
			break;
		}
		switch (h.type) {
		case GW_MSG_EXTENTS:
			ret = on_extents(s, buf, (size_t)n);
			if (ret)
				ret = gw_fail(s, "receive", ret, false, "bad EXTENTS frame");
			break;
		case GW_MSG_ROUND: {
			struct gw_rbuf r;

			gw_rbuf_init(&r, buf, (size_t)n);
			uint32_t round = gw_get_le32(&r);
			gw_get_le32(&r);
			uint64_t dirty = gw_get_le64(&r);
			if (gw_rbuf_done(&r) || round < s->round || (s->round == 0 && round == 0 && s->stats.rounds)) {
				ret = gw_fail(s, "receive", -EPROTO, false, "bad ROUND frame");
				break;
			}
			if (round == 0)
				start_populate(s);
			__atomic_store_n(&s->round, round, __ATOMIC_RELAXED);
			pthread_mutex_lock(&s->lock);
			s->stats.rounds = round + 1;
			pthread_mutex_unlock(&s->lock);
			gw_debug("mig", "round_start", "round=%u dirty_pages=%llu", round,
				 (unsigned long long)dirty);
			if (gw_fault_armed(s, GW_FAULT_DST_ROUND_N) && round >= (uint32_t)gw_param(s, GW_PARAM_FAULT_ARG))
				gw_fault_maybe_die(s, GW_FAULT_DST_ROUND_N, round);
			if (gw_fault_armed(s, GW_FAULT_DST_STALL) && round >= (uint32_t)gw_param(s, GW_PARAM_FAULT_ARG)) {
				gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=stall round=%u", round);
				for (;;)
					pause();	/* testing: a destination that stops reading */
			}
			break;
		}
		case GW_MSG_STATE:
			if (have_state) {
				ret = gw_fail(s, "final", -EPROTO, false, "second STATE frame");
				break;
			}
			gw_set_status(s, GW_STATUS_DEVICE);
			ret = gw_msg_state_decode(buf, (size_t)n, st);
			if (ret)
				ret = gw_fail(s, "final", ret, false, "malformed STATE frame");
			have_state = true;
			break;
		case GW_MSG_COMPLETE:
			gw_set_status(s, GW_STATUS_HANDOVER);
			ret = on_complete(s, buf, (size_t)n, st, have_state);
			if (!ret)
				ret = wait_go_and_resume(s);
			goto out;
		case GW_MSG_ERROR:
			ret = gw_fail_from_peer_frame(s, "receive", buf, (size_t)n);
			break;
		default:
			ret = gw_fail(s, "receive", -EPROTO, false, "unexpected %s frame on control",
				      gw_wire_type_name(h.type));
			break;
		}
		if (ret)
			break;
	}
out:
	gw_state_release(st);
	free(st);
	free(buf);
	return ret;
}

void *gw_dest_main(void *arg)
{
	struct gw_session *s = arg;
	struct gw_msg_hello *hello = calloc(1, sizeof(*hello));
	enum gw_status final_status;
	int ret;

	gw_log_set_side(s->side);
	s->round = 0;
	if (!hello) {
		ret = gw_fail(s, "setup", -ENOMEM, false, "no memory");
		goto out;
	}
	ret = handshake(s, hello);
	if (!ret)
		ret = accept_channels(s);
	if (!ret) {
		gw_set_status(s, GW_STATUS_ACTIVE);
		pthread_mutex_lock(&s->lock);
		s->stats.setup_time_ns = gw_now_ns() - s->t_start_ns;
		pthread_mutex_unlock(&s->lock);
		ret = control_loop(s);
	}
out:
	free(hello);
	if (s->pop_job) {
		struct populate_job *job = s->pop_job;

		free(job->ext);
		free(job);
		s->pop_job = NULL;
	}
	__atomic_store_n(&s->ctl_quiet, true, __ATOMIC_RELEASE);
	if (ret)
		gw_session_shutdown_conns(s);
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++)
		if (s->chans[i].thread_started)
			pthread_join(s->chans[i].thread, NULL);
	if (s->populate_running)
		pthread_join(s->populate_thread, NULL);
	s->populate_running = false;
	{
		unsigned n;
		struct gw_channel *chans = gw_session_detach_channels(s, &n);

		for (unsigned i = 0; i < n; i++) {
			s->stats.channel_bytes[i] = chans[i].conn.bytes_recv;
			gw_channel_release(&chans[i]);
		}
		free(chans);
	}
	gw_conn_close(&s->ctl);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		gw_bitmap_free(&s->dblk[i].written);
	final_status = ret ? GW_STATUS_FAILED : GW_STATUS_COMPLETED;
	if (ret)
		gw_log(GW_LOG_ERROR, "mig", "mig_failed",
		       "status=failed phase=%s reason=\"%s\" vm=not_resumed", s->err.phase, s->err.msg);
	else
		gw_log(GW_LOG_INFO, "mig", "mig_done", "status=completed total_ms=%.3f",
		       (gw_now_ns() - s->t_start_ns) / 1e6);
	pthread_mutex_lock(&s->lock);
	s->stats.nr_channels = s->nr_channels;
	s->stats.normal_pages = s->ctr_normal_pages;
	s->stats.duplicate_pages = s->ctr_zero_pages;
	s->stats.xbzrle_pages = s->ctr_xbzrle_pages;
	s->stats.normal_bytes = s->ctr_normal_pages * 4096;
	s->stats.total_time_ns = gw_now_ns() - s->t_start_ns;
	s->status = final_status;
	s->stats.status = final_status;
	s->running = false;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}
