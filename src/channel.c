/* SPDX-License-Identifier: MIT */
/* Data channel threads: see channel.h for the design and ordering rule. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "channel.h"
#include "codec/codec.h"
#include "session_int.h"
#include "net/transport.h"
#include "codec/xbzrle.h"
#include "mem/zero.h"

#define PAGE_BYTES 4096u
/* Raw stream bound: every entry a normal page or an XBZRLE record (le16 + data). */
#define RAW_CAP (GW_WIRE_MAX_BATCH_PAGES * (PAGE_BYTES + 2))

/* Whole-buffer pread/pwrite: 0 or -errno (-EIO for a short file). */
static int fd_rw_all(int fd, uint8_t *buf, size_t len, off_t off, bool write)
{
	while (len) {
		ssize_t n = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int pwrite_all(int fd, const uint8_t *buf, size_t len, off_t off)
{
	return fd_rw_all(fd, (uint8_t *)buf, len, off, true);
}

static int pread_all(int fd, uint8_t *buf, size_t len, off_t off)
{
	return fd_rw_all(fd, buf, len, off, false);
}

int gw_channel_setup(struct gw_channel *ch, struct gw_session *s, unsigned index, int fd)
{
	int64_t codec_id = gw_param(s, GW_PARAM_COMPRESS);

	memset(ch, 0, sizeof(*ch));
	ch->s = s;
	ch->index = index;
	gw_conn_init(&ch->conn, fd);
	pthread_mutex_init(&ch->qlock, NULL);
	pthread_cond_init(&ch->qcond, NULL);
	ch->codec_id = (int)(s->role == GW_ROLE_DEST ? GW_CODEC_NONE : codec_id);
	ch->raw_buf = malloc(RAW_CAP);
	ch->entries = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(uint64_t));
	ch->comp_cap = RAW_CAP + (RAW_CAP >> 4) + 65536;	/* >= every codec's bound */
	ch->comp_buf = malloc(ch->comp_cap);
	if (!ch->raw_buf || !ch->entries || !ch->comp_buf)
		return -ENOMEM;
	/* Priors until measured (bench/codec_bench on mix data, one core). */
	ch->est[GW_CODEC_LZ4].ns_per_byte = 1.3;
	ch->est[GW_CODEC_LZ4].ratio = 0.6;
	ch->est[GW_CODEC_ZSTD].ns_per_byte = 2.0;
	ch->est[GW_CODEC_ZSTD].ratio = 0.5;
	return 0;
}

void gw_channel_release(struct gw_channel *ch)
{
	for (unsigned i = 0; i < GW_CODEC__COUNT; i++)
		if (ch->codec_ctx[i])
			gw_codec_get((enum gw_codec_id)i)->ctx_free(ch->codec_ctx[i]);
	gw_xbzrle_cache_free(ch->xb);
	free(ch->raw_buf);
	free(ch->entries);
	free(ch->comp_buf);
	gw_conn_close(&ch->conn);
	ch->raw_buf = ch->comp_buf = NULL;
	ch->entries = NULL;
	ch->xb = NULL;
	memset(ch->codec_ctx, 0, sizeof(ch->codec_ctx));
}

/* ---------------- source ---------------- */

int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b)
{
	int err = 0;

	pthread_mutex_lock(&ch->qlock);
	while (ch->q_len == GW_CHAN_QUEUE_LEN && !(err = gw_failed(ch->s)) && !ch->exited)
		pthread_cond_wait(&ch->qcond, &ch->qlock);
	if (!err && ch->exited)
		err = -EPIPE;
	if (!err) {
		ch->q[(ch->q_head + ch->q_len) % GW_CHAN_QUEUE_LEN] = *b;
		ch->q_len++;
		pthread_cond_broadcast(&ch->qcond);
	}
	pthread_mutex_unlock(&ch->qlock);
	return err;
}

int gw_channel_drain(struct gw_channel *ch)
{
	int err = 0;

	pthread_mutex_lock(&ch->qlock);
	while ((ch->q_len || ch->busy) && !(err = gw_failed(ch->s)) && !ch->exited)
		pthread_cond_wait(&ch->qcond, &ch->qlock);
	pthread_mutex_unlock(&ch->qlock);
	return err ? err : gw_failed(ch->s);
}

void gw_channel_finish(struct gw_channel *ch)
{
	pthread_mutex_lock(&ch->qlock);
	ch->end_requested = true;
	pthread_cond_broadcast(&ch->qcond);
	pthread_mutex_unlock(&ch->qlock);
}

/* The context of codec @id for this channel (created on first use), or NULL. */
static void *codec_ctx(struct gw_channel *ch, enum gw_codec_id id, const struct gw_codec_ops **ops)
{
	int64_t level = ch->s->role == GW_ROLE_SOURCE ? gw_param(ch->s, GW_PARAM_COMPRESS_LEVEL) : 0;

	*ops = gw_codec_get(id);
	if (!*ops)
		return NULL;
	if (!ch->codec_ctx[id]) {
		/* Level matters to compression only; auto uses each codec's default. */
		if (level == 0 || ch->codec_id == GW_CODEC_AUTO)
			level = (*ops)->default_level;
		if (level < (*ops)->min_level)
			level = (*ops)->min_level;
		if (level > (*ops)->max_level)
			level = (*ops)->max_level;
		ch->codec_ctx[id] = (*ops)->ctx_new((int)level);
	}
	return ch->codec_ctx[id];
}

/*
 * Codec auto: choose per batch among none, lz4 and zstd from the link and
 * the CPU. Compression of batch k+1 overlaps the socket draining batch k,
 * so a batch costs max(compress time, wire time) per raw byte, against
 * link time for sending it raw. The link's cost per wire byte is what this
 * channel measured its sends to take (a full socket buffer blocks the
 * sender, so a slow link shows directly), or what the bandwidth cap
 * allows. The batch's own compressibility comes from compressing its first
 * 8 KiB with lz4 (about 1.5% of the batch's cost). Codecs are measured only
 * once the link has proven slower than lz4's prior cost (the first batch
 * always goes raw); then every 16th batch tries lz4 or zstd in turn to keep
 * both estimates fresh.
 */
#define AUTO_PROBE_BYTES 8192

static enum gw_codec_id auto_choose(struct gw_channel *ch, const uint8_t *raw, size_t raw_len)
{
	static const enum gw_codec_id cand[] = { GW_CODEC_LZ4, GW_CODEC_ZSTD };
	struct gw_session *s = ch->s;
	int64_t cap_bps = gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS);
	double link = ch->link_ns_per_byte, scale = 1.0, best_cost;
	enum gw_codec_id best = GW_CODEC_NONE;
	uint64_t n;

	if (cap_bps > 0 && 1e9 * s->nr_channels / (double)cap_bps > link)
		link = 1e9 * s->nr_channels / (double)cap_bps;
	/*
	 * Unknown (first batch) or faster than lz4's prior: send raw, and let
	 * the sends measure the link. No codec is even set up on a fast link.
	 */
	if (link <= ch->est[GW_CODEC_LZ4].ns_per_byte)
		return GW_CODEC_NONE;
	n = ch->auto_batches++;		/* counts slow-link batches only */
	if (n < 2)
		return cand[n];		/* measure both codecs once */
	if (n % 16 == 0)
		return cand[(n / 16) % 2];	/* keep both estimates fresh */
	if (raw_len >= 2 * AUTO_PROBE_BYTES) {
		const struct gw_codec_ops *ops;
		void *ctx = codec_ctx(ch, GW_CODEC_LZ4, &ops);
		ssize_t got = ctx ? ops->compress(ctx, raw, AUTO_PROBE_BYTES, ch->comp_buf, ch->comp_cap) : -1;

		if (got > 0) {
			double probe = (double)got / AUTO_PROBE_BYTES;

			if (probe > 0.95)
				return GW_CODEC_NONE;	/* incompressible batch */
			scale = probe / ch->est[GW_CODEC_LZ4].ratio;
		}
	}
	best_cost = link;
	for (unsigned i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		double ratio = ch->est[cand[i]].ratio * scale;
		double wire = (ratio < 1.0 ? ratio : 1.0) * link;
		double cost = ch->est[cand[i]].ns_per_byte > wire ? ch->est[cand[i]].ns_per_byte : wire;

		if (cost < best_cost) {
			best_cost = cost;
			best = cand[i];
		}
	}
	return best;
}

/*
 * Read the span of the batch (first to last page to send) into raw_buf.
 * fd-backed RAM is read with one pread: kernel-side copies skip the
 * first-touch faults of the mapping (seconds per GiB on virtualised hosts)
 * and leave userfaultfd tracking alone. Returns the span's first page or
 * -errno; anonymous RAM returns -EOPNOTSUPP (read through the mapping).
 */
static int64_t read_span(struct gw_channel *ch, const struct gw_ram_block *blk,
			 const struct gw_batch *b, uint64_t *span_pages)
{
	uint64_t first = UINT64_MAX, last = 0, len;
	int ret;

	if (blk->fd < 0)
		return -EOPNOTSUPP;
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		if (!b->mask[w])
			continue;
		if (first == UINT64_MAX)
			first = w * 64 + (unsigned)__builtin_ctzll(b->mask[w]);
		last = w * 64 + 63 - (unsigned)__builtin_clzll(b->mask[w]);
	}
	if (first == UINT64_MAX)
		return -ENODATA;
	*span_pages = last - first + 1;
	len = *span_pages * PAGE_BYTES;
	ret = pread_all(blk->fd, ch->raw_buf, len,
			(off_t)(blk->fd_offset_bytes + (b->first_page + first) * PAGE_BYTES));
	return ret ? ret : (int64_t)first;
}

static int send_batch(struct gw_channel *ch, const struct gw_batch *b)
{
	struct gw_session *s = ch->s;
	const struct gw_ram_block *blk = &s->vm.blocks[b->block];
	uint8_t *base = (uint8_t *)blk->host;
	struct gw_msg_pages_hdr ph = { .block = b->block, .round = __atomic_load_n(&s->round, __ATOMIC_RELAXED) };
	uint8_t phbuf[GW_PAGES_HDR_BYTES];
	uint64_t nr_normal = 0, nr_zero = 0, nr_xb = 0, span_pages = 0;
	size_t raw_len = 0;
	const uint8_t *data = ch->raw_buf;
	size_t data_len;
	struct iovec iov[3];
	int64_t span_first;
	int ret;

	span_first = read_span(ch, blk, b, &span_pages);
	if (span_first < 0 && span_first != -EOPNOTSUPP && span_first != -ENODATA)
		return gw_fail(s, "send", (int)span_first, false, "channel %u: reading RAM: %s",
			       ch->index, strerror((int)-span_first));
	/*
	 * Pages are compacted forward inside raw_buf: the write position never
	 * passes the read position (a record is at most a page), so the
	 * span's data is consumed before it is overwritten.
	 */
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		uint64_t bits = b->mask[w];

		while (bits) {
			unsigned bit = (unsigned)__builtin_ctzll(bits);
			uint64_t idx = w * 64 + bit, page = b->first_page + idx;
			uint64_t key = (uint64_t)b->block << 48 | page;
			enum gw_page_kind kind = GW_PAGE_NORMAL;
			uint8_t *slot = ch->raw_buf + raw_len;
			const uint8_t *src;
			uint8_t *old;

			bits &= bits - 1;
			src = span_first >= 0 ? ch->raw_buf + (idx - (uint64_t)span_first) * PAGE_BYTES
					      : base + page * PAGE_BYTES;
			if (gw_is_zero(src, PAGE_BYTES)) {
				kind = GW_PAGE_ZERO;
				nr_zero++;
				if (ch->xb && (old = gw_xbzrle_cache_get(ch->xb, key)))
					memset(old, 0, PAGE_BYTES);
			} else {
				/* Snapshot (mapping) or compaction (span): the guest may write meanwhile. */
				if (slot != src)
					memmove(slot, src, PAGE_BYTES);
				if (ch->xb && (old = gw_xbzrle_cache_get(ch->xb, key))) {
					uint8_t tmp[PAGE_BYTES / 2];
					ssize_t n = gw_xbzrle_encode(old, slot, PAGE_BYTES, tmp, sizeof(tmp));

					if (n >= 0) {
						memcpy(old, slot, PAGE_BYTES);
						slot[0] = (uint8_t)n;
						slot[1] = (uint8_t)(n >> 8);
						memcpy(slot + 2, tmp, (size_t)n);
						raw_len += 2 + (size_t)n;
						kind = GW_PAGE_XBZRLE;
						nr_xb++;
					}
				}
				if (kind == GW_PAGE_NORMAL) {
					if (ch->xb)
						gw_xbzrle_cache_put(ch->xb, key, slot);
					raw_len += PAGE_BYTES;
					nr_normal++;
				}
			}
			ch->entries[ph.nr_entries++] = htole64(gw_page_entry(page, kind));
		}
	}
	if (!ph.nr_entries)
		return 0;
	if (gw_fault_armed(s, GW_FAULT_SRC_CORRUPT) && raw_len &&
	    ch->frames + 1 == (uint64_t)gw_param(s, GW_PARAM_FAULT_ARG))
		ch->conn.corrupt_next = true;

	ph.codec = GW_CODEC_NONE;
	ph.raw_bytes = (uint32_t)raw_len;
	data_len = raw_len;
	enum gw_codec_id id = (enum gw_codec_id)ch->codec_id;

	if (raw_len && id == GW_CODEC_AUTO)
		id = auto_choose(ch, ch->raw_buf, raw_len);
	if (raw_len && id != GW_CODEC_NONE) {
		const struct gw_codec_ops *ops;
		void *ctx = codec_ctx(ch, id, &ops);
		uint64_t t0 = gw_now_ns();
		ssize_t n;

		if (!ctx)
			return gw_fail(s, "send", -EOPNOTSUPP, false, "channel %u: codec %s unavailable",
				       ch->index, gw_codec_name(id));
		n = ops->compress(ctx, ch->raw_buf, raw_len, ch->comp_buf, ch->comp_cap);
		if (n > 0) {
			double ns_per_byte = (double)(gw_now_ns() - t0) / (double)raw_len;

			ch->est[id].ns_per_byte = 0.8 * ch->est[id].ns_per_byte + 0.2 * ns_per_byte;
			ch->est[id].ratio = 0.8 * ch->est[id].ratio + 0.2 * ((double)n / (double)raw_len);
		}
		if (n > 0 && (size_t)n < raw_len) {
			ph.codec = id;
			data = ch->comp_buf;
			data_len = (size_t)n;
		}
	}
	ph.data_bytes = (uint32_t)data_len;
	gw_msg_pages_hdr_encode(phbuf, &ph);
	iov[0] = (struct iovec){ phbuf, sizeof(phbuf) };
	iov[1] = (struct iovec){ ch->entries, ph.nr_entries * sizeof(uint64_t) };
	iov[2] = (struct iovec){ (void *)data, data_len };
	gw_ratelimit(s, GW_WIRE_HDR_BYTES + sizeof(phbuf) + iov[1].iov_len + data_len);
	uint64_t t_send = gw_now_ns();
	ret = gw_conn_send(&ch->conn, GW_MSG_PAGES, 0, iov, data_len ? 3 : 2, NULL, 0);
	if (!ret && data_len >= 65536) {
		double ns_per_byte = (double)(gw_now_ns() - t_send) / (double)data_len;

		uint64_t rate_bps;
		bool app_limited;

		/*
		 * TCP: the kernel measures the delivery rate from ACKs, whatever
		 * our sending pattern. An app-limited sample (we were the
		 * bottleneck) is a lower bound of the rate: it may only make the
		 * link look faster. Elsewhere (unix:): the time a send waited.
		 */
		if (gw_tcp_delivery_rate(ch->conn.fd, &rate_bps, &app_limited) == 0) {
			double link = 1e9 / (double)rate_bps;

			if (!ch->link_ns_per_byte || !app_limited || link < ch->link_ns_per_byte)
				ch->link_ns_per_byte = ch->link_ns_per_byte ?
					0.7 * ch->link_ns_per_byte + 0.3 * link : link;
		} else {
			ch->link_ns_per_byte = ch->link_ns_per_byte ?
				0.8 * ch->link_ns_per_byte + 0.2 * ns_per_byte : ns_per_byte;
		}
	}
	if (ret)
		return gw_fail(s, "send", ret, false, "channel %u: sending pages: %s",
			       ch->index, strerror(-ret));
	ch->frames++;
	ch->pages += ph.nr_entries;
	__atomic_fetch_add(&s->ctr_normal_pages, nr_normal, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zero_pages, nr_zero, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_xbzrle_pages, nr_xb, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_raw_bytes, (nr_normal + nr_xb) * PAGE_BYTES, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_wire_payload_bytes, data_len, __ATOMIC_RELAXED);
	return 0;
}

static int send_end(struct gw_channel *ch)
{
	uint8_t buf[24];
	struct gw_wbuf w;

	gw_wbuf_init(&w, buf, sizeof(buf));
	gw_put_le32(&w, ch->index);
	gw_put_le32(&w, 0);
	gw_put_le64(&w, ch->frames);
	gw_put_le64(&w, ch->pages);
	return gw_conn_send_buf(&ch->conn, GW_MSG_CHAN_END, buf, w.len);
}

void *gw_channel_send_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_session *s = ch->s;
	int64_t xb_bytes = gw_param(s, GW_PARAM_XBZRLE_CACHE_BYTES);
	struct gw_batch b;
	int ret = 0;

	gw_log_set_side(s->side);
	if (xb_bytes > 0) {
		ch->xb = gw_xbzrle_cache_new((size_t)xb_bytes / s->nr_channels, PAGE_BYTES);
		if (!ch->xb)
			ret = gw_fail(s, "setup", -ENOMEM, false, "channel %u: XBZRLE cache", ch->index);
	}
	while (!ret) {
		pthread_mutex_lock(&ch->qlock);
		while (!ch->q_len && !ch->end_requested && !gw_failed(s))
			pthread_cond_wait(&ch->qcond, &ch->qlock);
		if (gw_failed(s) || (!ch->q_len && ch->end_requested)) {
			pthread_mutex_unlock(&ch->qlock);
			break;
		}
		b = ch->q[ch->q_head];
		ch->q_head = (ch->q_head + 1) % GW_CHAN_QUEUE_LEN;
		ch->q_len--;
		ch->busy = true;
		pthread_cond_broadcast(&ch->qcond);
		pthread_mutex_unlock(&ch->qlock);

		ret = send_batch(ch, &b);

		pthread_mutex_lock(&ch->qlock);
		ch->busy = false;
		pthread_cond_broadcast(&ch->qcond);
		pthread_mutex_unlock(&ch->qlock);
	}
	if (!ret && !gw_failed(s)) {
		ret = send_end(ch);
		if (ret)
			gw_fail(s, "final", ret, false, "channel %u: sending end: %s",
				ch->index, strerror(-ret));
	}
	pthread_mutex_lock(&ch->qlock);
	ch->exited = true;
	pthread_cond_broadcast(&ch->qcond);
	pthread_mutex_unlock(&ch->qlock);
	return NULL;
}

/* ---------------- destination ---------------- */

#define RECV_IOV_MAX 64


static off_t page_off(const struct gw_dst_block *db, uint64_t page)
{
	return (off_t)(db->fd_offset_bytes + page * PAGE_BYTES);
}

/* Apply a zero page: fresh memory is already zero, so write only pages we wrote. */
static void apply_zero(struct gw_dst_block *db, uint64_t page)
{
	static const uint8_t zero_page[PAGE_BYTES];

	if (gw_bitmap_test(&db->written, page)) {
		if (db->fd < 0 || pwrite_all(db->fd, zero_page, PAGE_BYTES, page_off(db, page)))
			memset(db->host + page * PAGE_BYTES, 0, PAGE_BYTES);
		__atomic_fetch_and(&db->written.words[page / 64], ~(1ULL << (page % 64)), __ATOMIC_RELAXED);
	}
}

/*
 * Receive normal pages straight into guest RAM (codec none, no XBZRLE):
 * contiguous pages coalesce into one iovec segment.
 */
static int recv_direct(struct gw_channel *ch, struct gw_dst_block *db, uint32_t n, uint32_t *crc)
{
	struct iovec iov[RECV_IOV_MAX];
	int cnt = 0, ret;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t e = le64toh(ch->entries[i]);
		uint8_t *dst;

		if ((e & 15) != GW_PAGE_NORMAL)
			continue;
		dst = db->host + (e >> 4) * PAGE_BYTES;
		if (cnt && (uint8_t *)iov[cnt - 1].iov_base + iov[cnt - 1].iov_len == dst) {
			iov[cnt - 1].iov_len += PAGE_BYTES;
			continue;
		}
		if (cnt == RECV_IOV_MAX) {
			ret = gw_conn_recv_iov(&ch->conn, iov, cnt, crc);
			if (ret)
				return ret;
			cnt = 0;
		}
		iov[cnt++] = (struct iovec){ dst, PAGE_BYTES };
	}
	return cnt ? gw_conn_recv_iov(&ch->conn, iov, cnt, crc) : 0;
}

static int recv_pages(struct gw_channel *ch, const struct gw_frame_hdr *h, uint32_t *crc)
{
	struct gw_session *s = ch->s;
	uint8_t phbuf[GW_PAGES_HDR_BYTES];
	struct iovec iov = { phbuf, sizeof(phbuf) };
	struct gw_msg_pages_hdr ph;
	struct gw_dst_block *db;
	uint64_t nr_normal = 0, nr_xb = 0;
	const uint8_t *raw;
	size_t off;
	int ret;

	if (h->len < GW_PAGES_HDR_BYTES)
		return -EPROTO;
	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (ret)
		return ret;
	if (gw_msg_pages_hdr_decode(phbuf, h->len, &ph))
		return -EPROTO;
	if (ph.block >= s->vm.nr_blocks)
		return -EPROTO;
	db = &s->dblk[ph.block];
	iov = (struct iovec){ ch->entries, ph.nr_entries * sizeof(uint64_t) };
	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < ph.nr_entries; i++) {
		uint64_t e = le64toh(ch->entries[i]);
		unsigned kind = e & 15;

		if ((e >> 4) >= db->nr_pages)
			return -ERANGE;
		if (kind == GW_PAGE_NORMAL)
			nr_normal++;
		else if (kind == GW_PAGE_XBZRLE)
			nr_xb++;
		else if (kind != GW_PAGE_ZERO)
			return -EPROTO;
	}
	if (nr_xb && !(s->hello_flags & GW_HELLO_XBZRLE))
		return -EPROTO;
	if (nr_xb == 0 && ph.raw_bytes != nr_normal * PAGE_BYTES)
		return -EPROTO;
	if (ph.raw_bytes < nr_normal * PAGE_BYTES + nr_xb * 2)
		return -EPROTO;

	if (ph.codec == GW_CODEC_NONE && nr_xb == 0 && db->fd < 0) {
		ret = recv_direct(ch, db, ph.nr_entries, crc);
		if (ret)
			return ret;
		ret = gw_conn_recv_check(h, *crc);
		if (ret)
			return ret;
		raw = NULL;
	} else {
		iov = (struct iovec){ ch->comp_buf, ph.data_bytes };
		if (ph.data_bytes > ch->comp_cap)
			return -EPROTO;
		ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
		if (ret)
			return ret;
		ret = gw_conn_recv_check(h, *crc);
		if (ret)
			return ret;
		if (ph.codec != GW_CODEC_NONE) {
			const struct gw_codec_ops *c;
			void *ctx = codec_ctx(ch, (enum gw_codec_id)ph.codec, &c);

			if (!c)
				return -EOPNOTSUPP;
			if (!ctx)
				return -ENOMEM;
			if (c->decompress(ctx, ch->comp_buf, ph.data_bytes, ch->raw_buf, ph.raw_bytes))
				return -EUCLEAN;
			raw = ch->raw_buf;
		} else {
			raw = ch->comp_buf;
		}
	}

	/* Data is checked: apply what was not received in place. */
	off = 0;
	for (uint32_t i = 0; i < ph.nr_entries; i++) {
		uint64_t e = le64toh(ch->entries[i]);
		uint64_t page = e >> 4;
		uint8_t *dst = db->host + page * PAGE_BYTES;

		switch (e & 15) {
		case GW_PAGE_ZERO:
			apply_zero(db, page);
			break;
		case GW_PAGE_NORMAL:
			if (raw) {
				uint32_t run = 1;

				if (off + PAGE_BYTES > ph.raw_bytes)
					return -EPROTO;
				if (db->fd >= 0) {
					/* Coalesce following normal pages that are contiguous. */
					while (i + run < ph.nr_entries) {
						uint64_t e2 = le64toh(ch->entries[i + run]);

						if ((e2 & 15) != GW_PAGE_NORMAL || (e2 >> 4) != page + run ||
						    off + (uint64_t)(run + 1) * PAGE_BYTES > ph.raw_bytes)
							break;
						run++;
					}
					ret = pwrite_all(db->fd, raw + off, (size_t)run * PAGE_BYTES, page_off(db, page));
					if (ret)
						return ret;
				} else {
					memcpy(dst, raw + off, PAGE_BYTES);
				}
				off += (size_t)run * PAGE_BYTES;
				for (uint32_t k = 0; k < run; k++)
					gw_bitmap_set_atomic(&db->written, page + k);
				i += run - 1;
				break;
			}
			gw_bitmap_set_atomic(&db->written, page);
			break;
		case GW_PAGE_XBZRLE: {
			uint32_t n;

			if (off + 2 > ph.raw_bytes)
				return -EPROTO;
			n = (uint32_t)raw[off] | (uint32_t)raw[off + 1] << 8;
			off += 2;
			if (n > ph.raw_bytes - off)
				return -EPROTO;
			if (db->fd >= 0) {
				uint8_t tmp[PAGE_BYTES];

				ret = pread_all(db->fd, tmp, PAGE_BYTES, page_off(db, page));
				if (ret)
					return ret;
				if (gw_xbzrle_decode(raw + off, n, tmp, PAGE_BYTES))
					return -EUCLEAN;
				ret = pwrite_all(db->fd, tmp, PAGE_BYTES, page_off(db, page));
				if (ret)
					return ret;
			} else if (gw_xbzrle_decode(raw + off, n, dst, PAGE_BYTES)) {
				return -EUCLEAN;
			}
			off += n;
			gw_bitmap_set_atomic(&db->written, page);
			break;
		}
		}
	}
	if (raw && off != ph.raw_bytes)
		return -EPROTO;
	ch->frames++;
	ch->pages += ph.nr_entries;
	__atomic_fetch_add(&s->ctr_normal_pages, nr_normal, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_xbzrle_pages, nr_xb, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zero_pages, ph.nr_entries - nr_normal - nr_xb, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_raw_bytes, (nr_normal + nr_xb) * PAGE_BYTES, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_wire_payload_bytes, ph.data_bytes, __ATOMIC_RELAXED);
	return 0;
}

static const char *recv_err_text(int err)
{
	switch (err) {
	case -EPROTO: return "malformed frame";
	case -ERANGE: return "page outside guest RAM";
	case -EBADMSG: return "checksum mismatch";
	case -EUCLEAN: return "corrupt compressed or XBZRLE payload";
	case -ECONNRESET: return "source closed the connection";
	case -ETIMEDOUT: return "source silent past the I/O timeout";
	default: return strerror(-err);
	}
}

void *gw_channel_recv_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_session *s = ch->s;
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	struct gw_frame_hdr h;
	uint32_t crc;
	int ret = 0;

	gw_log_set_side(s->side);
	for (;;) {
		if (gw_failed(s))
			break;
		ret = gw_conn_recv_hdr(&ch->conn, &h, &crc);
		if (ret)
			break;
		if (gw_fault_armed(s, GW_FAULT_DST_STALL) &&
		    __atomic_load_n(&s->round, __ATOMIC_RELAXED) >= (uint32_t)gw_param(s, GW_PARAM_FAULT_ARG))
			for (;;)
				pause();	/* testing: a destination that stops reading */
		if (h.type == GW_MSG_PAGES) {
			if (gw_fault_armed(s, GW_FAULT_DST_ROUND0) && s->round == 0 &&
			    ch->conn.bytes_recv >= (uint64_t)gw_param(s, GW_PARAM_FAULT_ARG))
				gw_fault_maybe_die(s, GW_FAULT_DST_ROUND0, (uint64_t)gw_param(s, GW_PARAM_FAULT_ARG));
			ret = recv_pages(ch, &h, &crc);
			if (ret)
				break;
			continue;
		}
		if (h.type == GW_MSG_CHAN_END || h.type == GW_MSG_ERROR) {
			struct iovec iov = { buf, h.len };
			struct gw_rbuf r;

			if (h.len > sizeof(buf)) {
				ret = -EPROTO;
				break;
			}
			ret = gw_conn_recv_iov(&ch->conn, &iov, 1, &crc);
			if (!ret)
				ret = gw_conn_recv_check(&h, crc);
			if (ret)
				break;
			if (h.type == GW_MSG_ERROR) {
				gw_fail_from_peer_frame(s, "receive", buf, h.len);
				return NULL;
			}
			gw_rbuf_init(&r, buf, h.len);
			uint32_t idx = gw_get_le32(&r);
			gw_get_le32(&r);
			uint64_t frames = gw_get_le64(&r), pages = gw_get_le64(&r);

			if (gw_rbuf_done(&r) || idx != ch->index || frames != ch->frames ||
			    pages != ch->pages) {
				gw_fail(s, "final", -EPROTO, false,
					"channel %u: end says %llu frames/%llu pages, received %llu/%llu",
					ch->index, (unsigned long long)frames, (unsigned long long)pages,
					(unsigned long long)ch->frames, (unsigned long long)ch->pages);
				return NULL;
			}
			pthread_mutex_lock(&ch->qlock);
			ch->end_requested = true;	/* destination: CHAN_END seen */
			pthread_mutex_unlock(&ch->qlock);
			return NULL;
		}
		ret = -EPROTO;
		gw_fail(s, "receive", ret, false, "channel %u: unexpected %s frame",
			ch->index, gw_wire_type_name(h.type));
		return NULL;
	}
	if (ret && !gw_failed(s))
		gw_fail(s, "receive", ret, false, "channel %u: %s", ch->index, recv_err_text(ret));
	return NULL;
}

int gw_channels_start(struct gw_session *s, void *(*fn)(void *))
{
	for (unsigned i = 0; i < s->nr_channels; i++) {
		int ret = -pthread_create(&s->chans[i].thread, NULL, fn, &s->chans[i]);

		if (ret)
			return gw_fail(s, "setup", ret, false, "channel thread");
		s->chans[i].thread_started = true;
	}
	return 0;
}

int gw_channels_create(struct gw_session *s, unsigned n)
{
	struct gw_channel *chans = calloc(n ? n : 1, sizeof(*chans));

	if (!chans)
		return gw_fail(s, "setup", -ENOMEM, false, "no memory for channels");
	for (unsigned i = 0; i < n; i++) {
		int ret = gw_channel_setup(&chans[i], s, i, -1);

		if (ret) {
			for (unsigned j = 0; j <= i; j++)
				gw_channel_release(&chans[j]);
			free(chans);
			return gw_fail(s, "setup", ret, false, "channel %u setup", i);
		}
	}
	gw_session_publish_channels(s, chans, n);
	return 0;
}
