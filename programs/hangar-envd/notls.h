/*
 * The GnuTLS entry points a static libmicrohttpd refers to (notls.c).
 */
#ifndef HANGAR_ENVD_NOTLS_H
#define HANGAR_ENVD_NOTLS_H

#include <stddef.h>

int gnutls_global_init(void);
void gnutls_global_deinit(void);
extern void *(*gnutls_malloc)(size_t);

/* Reached only on a TLS connection. The parameters do not matter: each one
 * aborts before it reads any. */
#define NOTLS_ENTRY_POINTS(X) \
	X(gnutls_alpn_set_protocols) \
	X(gnutls_bye) \
	X(gnutls_certificate_allocate_credentials) \
	X(gnutls_certificate_free_credentials) \
	X(gnutls_certificate_server_set_request) \
	X(gnutls_certificate_set_dh_params) \
	X(gnutls_certificate_set_retrieve_function2) \
	X(gnutls_certificate_set_retrieve_function3) \
	X(gnutls_certificate_set_x509_key_mem) \
	X(gnutls_certificate_set_x509_key_mem2) \
	X(gnutls_certificate_set_x509_trust_mem) \
	X(gnutls_cipher_get) \
	X(gnutls_credentials_set) \
	X(gnutls_deinit) \
	X(gnutls_dh_params_deinit) \
	X(gnutls_dh_params_import_pkcs3) \
	X(gnutls_dh_params_init) \
	X(gnutls_handshake) \
	X(gnutls_init) \
	X(gnutls_priority_deinit) \
	X(gnutls_priority_init) \
	X(gnutls_priority_set) \
	X(gnutls_protocol_get_version) \
	X(gnutls_psk_allocate_server_credentials) \
	X(gnutls_psk_free_server_credentials) \
	X(gnutls_psk_set_server_credentials_function) \
	X(gnutls_record_check_pending) \
	X(gnutls_record_get_direction) \
	X(gnutls_record_recv) \
	X(gnutls_record_send) \
	X(gnutls_session_get_ptr) \
	X(gnutls_session_set_ptr) \
	X(gnutls_strerror) \
	X(gnutls_transport_set_int2)

#define NOTLS_DECLARE(name) int name(void);
NOTLS_ENTRY_POINTS(NOTLS_DECLARE)
#undef NOTLS_DECLARE

#endif
