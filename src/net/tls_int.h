/* SPDX-License-Identifier: MIT */
/* Shared by net/tls_ctx.c and net/tls.c only: the context and the PSK table. */
#ifndef GW_NET_TLS_INT_H
#define GW_NET_TLS_INT_H

#include <openssl/ssl.h>
#include "net/tls.h"

#define GW_TLS_PSK_MAX_KEYS 64
#define GW_TLS_PSK_MAX_KEY_BYTES 64

struct gw_tls_psk {
	char identity[GW_TLS_NAME_MAX];
	unsigned char key[GW_TLS_PSK_MAX_KEY_BYTES];
	size_t key_len;
};

/* Set at creation, read-only after: shared by the threads of a migration. */
struct gw_tls_ctx {
	SSL_CTX *ssl_ctx;
	enum gw_tls_role role;
	bool psk_mode;
	struct gw_tls_config cfg;
	/* PSK: the client presents keys[0]; the server accepts any of them. */
	struct gw_tls_psk keys[GW_TLS_PSK_MAX_KEYS];
	unsigned nr_keys;
	char own_cert_note[160];	/* our own certificate expired or not yet valid: said with a refusal */
};

/*
 * tls_bio.c: a write-only BIO for a session after its handshake: records
 * gather in @buffer_bytes and leave with send(MSG_NOSIGNAL) when it fills
 * or at BIO_flush. NULL on failure.
 */
BIO *gw_tls_send_bio_new(int fd, size_t buffer_bytes);
/* The ex_data index of struct gw_tls in its SSL (for the callbacks). */
int gw_tls_ex_index(void);
/* PSK callbacks (tls_ctx.c), installed on SSL objects of a PSK context. */
int gw_tls_psk_use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
			   SSL_SESSION **sess);
int gw_tls_psk_find_session(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess);
/* tls.c: the PSK identity a client presented, known or not (the peer's name, or the refusal's reason). */
void gw_tls_note_psk_identity(SSL *ssl, const unsigned char *id, size_t idlen, bool known);

#endif
