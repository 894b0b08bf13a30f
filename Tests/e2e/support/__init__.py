"""Test support for photolalad's process-level tests.

- `daemon`: runs the real photolalad binary in a temporary world.
- `stack`: moto_server (S3/STS/IAM) on loopback with authentication on.
- `fake_backend`: the Photolala backend of shared/spec/backend-api.md, with test controls.
- `fault_proxy`: an HTTP/1.1 proxy in front of moto that injects S3 faults.

Modules import lazily (boto3 and flask are only loaded by the tests that need them).
"""
