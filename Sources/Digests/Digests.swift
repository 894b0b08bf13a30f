/// Digests: MD5, SHA-256 and HMAC-SHA256 over OpenSSL, lowercase hex, and a file's identity from its stat; shared by the hasher and the S3 transport so neither depends on the other.
