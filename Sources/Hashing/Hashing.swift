/// Hashing: Streaming digests over OpenSSL EVP with a fixed buffer: MD5 of files, SHA-256 and HMAC for signing.

