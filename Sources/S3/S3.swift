/// S3: Talks to S3: the SigV4 signer, the S3 client (PUT, HEAD, multipart) and S3's XML errors.

