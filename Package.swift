// swift-tools-version: 6.0
import PackageDescription

// GLib's headers, for vips.h (pkg-config's --cflags, without the --libs a systemLibrary would link).
#if arch(arm64)
let multiarch = "aarch64-linux-gnu"
#else
let multiarch = "x86_64-linux-gnu"
#endif
let glibHeaders = ["-I/usr/include/glib-2.0", "-I/usr/lib/\(multiarch)/glib-2.0/include"]

let package = Package(
    name: "photolalad",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "photolalad", targets: ["photolalad"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Already in the graph through async-http-client and swift-nio-extras; named here
        // because the Bucket target uses them directly (TLS trust).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.1.0"),
        // The notify command: spawned in its own process group, with a time limit and its output bounded.
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        // The account key, the recovery key and the sealed manifest (Vault); the Bucket tests
        // make their own certificates with it.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"6.0.0"),
    ],
    targets: [
        // C libraries, linked from the system.
        .systemLibrary(name: "CInotifyTools", path: "Sources/CInotifyTools"),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd",
                       providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),

        .systemLibrary(name: "CSeccomp", path: "Sources/CSeccomp", pkgConfig: "libseccomp", providers: [.apt(["libseccomp-dev"])]),
        // zlib: the manifest's sealed JSON (headers, device records) is deflated first.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),
        // libqrencode: the status page's sign-in QR code (at run time Debian's libqrencode4).
        .systemLibrary(name: "CQRencode", path: "Sources/CQRencode", providers: [.apt(["libqrencode-dev"])]),

        .target(name: "CLinux"),
        // libvips/LibRaw rendering and the seccomp sandbox of the preview worker. The decoders are
        // loaded with dlopen by the worker alone (Sources/CPreviews/decoders.h), never linked:
        // only their headers are used here (libvips-dev, libraw-dev), and vips.h needs GLib's.
        .target(name: "CPreviews", dependencies: ["CSeccomp"], cSettings: [.unsafeFlags(glibHeaders)]),
        .target(name: "CMultiMD5", dependencies: ["COpenSSL"]),

        // The counters' catalog is here so every part counts through swift-metrics' API alone.
        .target(name: "PhotolalaCore", dependencies: [
            .product(name: "CoreMetrics", package: "swift-metrics"),
            // StageLoop stops on graceful shutdown.
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Config", dependencies: [
            "PhotolalaCore",
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        // MD5, SHA-256, HMAC, hex, the hasher and VerifiedFile (the very file that was hashed),
        // for the stages and the S3 transport alike: C libraries only.
        .target(name: "Digests", dependencies: ["PhotolalaCore", "COpenSSL", "CLinux", "CMultiMD5"]),
        .target(name: "Queue", dependencies: [
            "PhotolalaCore",
            .product(name: "GRDB", package: "GRDB.swift"),
            // StageContext: the log every stage writes to.
            .product(name: "Logging", package: "swift-log"),
            // The SQLite C API, for the statements a scan runs once per file (RawStatement).
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
        ]),
        .target(name: "Watcher", dependencies: [
            "PhotolalaCore", "CInotifyTools", "CLinux",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The one way to the bucket: SigV4, the S3 client, TLS trust (the system store +
        // tls.ca_file, certificate failures told as sentences), the `Bucket` protocol and the
        // `BucketSession` every stage signs through.
        .target(name: "Bucket", dependencies: [
            "PhotolalaCore", "Digests",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOTLS", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
        ]),
        // Test-only: a bucket in memory behind the real protocol, a fixed grant source, a test clock.
        .target(name: "BucketTesting", dependencies: [
            "Bucket", "PhotolalaCore", "Digests", "Vault",
            .product(name: "NIOCore", package: "swift-nio"),
        ]),
        // The account: the backend client (behind `AccountBackend`), the sign-in store, the
        // STS and Apple-check machines, and `AccountService`, every stage's grant source.
        .target(name: "Account", dependencies: [
            "PhotolalaCore", "Bucket",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Ingest", dependencies: [
            "PhotolalaCore", "Queue", "Digests", "Watcher", "CLinux",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Upload", dependencies: [
            "PhotolalaCore", "Queue", "Bucket", "Digests",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // Reading a photo for the apps: format, head MD5, date and the PTM-256 thumbnail,
        // decoded only in the sandboxed worker process.
        .target(name: "Previews", dependencies: [
            "PhotolalaCore", "Digests", "CPreviews", "CLinux",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The thumbnail stage: uploaded objects → photo rows `ready` (thumbnail in the bucket).
        .target(name: "Thumbnails", dependencies: [
            "PhotolalaCore", "Queue", "Bucket", "Digests", "Previews",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The device manifest's values (docs/manifest.md): the segment codec, keys and chain,
        // replay, device record, the reader's checks, the frames to the command. No I/O.
        .target(name: "ManifestFormat", dependencies: ["PhotolalaCore", "Digests", "Vault", "CZlib"]),
        // The stage that writes the manifest, and its tables in the queue database.
        .target(name: "Manifest", dependencies: [
            "PhotolalaCore", "ManifestFormat", "Queue", "Bucket", "CLinux", "Vault",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Inventory", dependencies: [
            "PhotolalaCore", "Queue", "Bucket", "Digests",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The apps' catalog: merge our ready photos into the user's catalog and publish it (app-catalog.md).
        .target(name: "Catalog", dependencies: [
            "PhotolalaCore", "Queue", "Bucket", "Digests",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // Who did what: the tamper-evident trail (cli.md "audit"); parts record through
        // PhotolalaCore's AuditRecorder and never import it.
        .target(name: "Audit", dependencies: [
            "PhotolalaCore", "Digests", "Queue", "Vault",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The local API and the one HTTP server shape: the control socket (server, wire
        // types, client) and Prometheus metrics (the status snapshot and the parts'
        // counters as text, on the socket and over TCP).
        .target(name: "Control", dependencies: [
            "PhotolalaCore", "CLinux",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The account key, the recovery key, and sealing what the bucket keeps under metadata/
        // (privacy.md): values and the local key file, no network.
        .target(name: "Vault", dependencies: ["PhotolalaCore", .product(name: "Crypto", package: "swift-crypto")]),
        // The account key and the recovery key on this NAS: made at an account's first sign-in,
        // asked for on every other NAS, rotated on demand (`KeyService`, a side service).
        .target(name: "Keys", dependencies: [
            "PhotolalaCore", "Vault", "Bucket", "ManifestFormat", "Digests",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // Restoring, by the side it runs on. What the two sides say to each other over the
        // control socket (the calls of `devices` and `restore`, the export's listing lines)
        // and the facts both go by (archive classes), so neither imports the other.
        .target(name: "RestoreWire", dependencies: ["PhotolalaCore", "ManifestFormat"]),
        // The daemon's side: devices, manifests opened and checked, objects read back and
        // relayed to the command (ranged, parallel, under a memory budget), the export's listing
        // and the apps' catalog read (`AppCatalogCopy`, `CatalogDates`; the mirror's too).
        .target(name: "RestoreRelay", dependencies: [
            "PhotolalaCore", "ManifestFormat", "RestoreWire", "Control", "Bucket", "Digests", "Vault",
            // `restore --by-date` names a file by its first bytes when nothing else says what it is.
            "Previews",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // What the command and the mirror both write with: the plan of a file's place, the
        // safe writer (no link followed, checked, synced, renamed), owners, what to do with
        // what stands there, and the export's names. Below both sides, so the daemon (the
        // mirror) never imports the command.
        .target(name: "RestoreFiles", dependencies: [
            "PhotolalaCore", "ManifestFormat", "RestoreWire", "Digests", "CLinux",
        ]),
        // The command's side (`photolalactl restore`): the run, its files written (through
        // RestoreFiles) with the rights of whoever runs it, read back and checked, in a task group; its blocking
        // calls (the socket, fdatasync) on a thread pool of its own (NIOPosix's).
        .target(name: "RestoreCtl", dependencies: [
            "PhotolalaCore", "ManifestFormat", "RestoreWire", "RestoreFiles", "Control", "Digests", "CLinux",
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // The mirror (mirror.md): the NAS's own verified, dated copy of every photo of the
        // account; written as a restore writes (RestoreFiles' writer), named as an export names,
        // its catalog read as the export's relay reads it (RestoreRelay).
        .target(name: "Mirror", dependencies: [
            "PhotolalaCore", "Queue", "Bucket", "Digests", "ManifestFormat", "RestoreFiles", "RestoreRelay", "RestoreWire", "Previews", "CLinux",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // Telling the owner when backups stop: the policy deciding what to send, and the
        // webhook, command and dead man's switch channels that send it (config.md "Notifications").
        .target(name: "Notify", dependencies: [
            "PhotolalaCore", "Bucket",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Subprocess", package: "swift-subprocess"),
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        // The status page (web.md): its server on the daemon's one server shape (with TLS),
        // sessions, the JSON API and server-sent events, the QR code, and the page itself,
        // compiled into the binary.
        .target(name: "Web", dependencies: [
            "PhotolalaCore", "Control", "Queue", "CQRencode", "CLinux",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ], resources: [
            .embedInCode("Assets/index.html"), .embedInCode("Assets/app.js"), .embedInCode("Assets/app.css"),
            .embedInCode("Assets/favicon.svg"),
        ]),
        .target(name: "Daemon", dependencies: [
            "PhotolalaCore", "Bucket", "Config", "Queue", "Control", "Digests", "Account", "Upload", "Ingest", "Inventory", "Thumbnails", "Catalog", "CSystemd", "CLinux",
            "Manifest", "ManifestFormat", "RestoreRelay", "RestoreWire", "Notify", "Audit", "Keys", "Vault", "Web", "Mirror",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
        .target(name: "CLI", dependencies: [
            "PhotolalaCore", "Config", "Control", "Daemon", "Previews", "RestoreCtl", "RestoreFiles", "RestoreWire", "Digests", "Vault", "Audit",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "photolalad", dependencies: ["CLI"]),

        .testTarget(name: "ConfigTests", dependencies: ["Config"]),
        .testTarget(name: "PhotolalaCoreTests", dependencies: [
            // CLinux: glibc's mallinfo2, to see that a cancelled sleep gives its memory back.
            "PhotolalaCore", "BucketTesting", "CLinux", .product(name: "MetricsTestKit", package: "swift-metrics"),
        ]),
        .testTarget(name: "DigestsTests", dependencies: ["Digests", "PhotolalaCore", "CMultiMD5"]),
        .testTarget(name: "QueueTests", dependencies: ["Queue", "PhotolalaCore", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "WatcherTests", dependencies: [
            "Watcher", "PhotolalaCore", .product(name: "MetricsTestKit", package: "swift-metrics"),
        ]),
        .testTarget(name: "BucketTests", dependencies: [
            "Bucket", "BucketTesting", "Digests", "PhotolalaCore",
            .product(name: "MetricsTestKit", package: "swift-metrics"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "ControlTests", dependencies: [
            "Control", "PhotolalaCore", .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
        ]),
        .testTarget(name: "AccountTests", dependencies: [
            "Account", "Bucket", "BucketTesting", "PhotolalaCore", .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "AuditTests", dependencies: ["Audit", "Queue", "PhotolalaCore", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "CLITests", dependencies: [
            "CLI", "Control", "PhotolalaCore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .testTarget(name: "IngestTests", dependencies: [
            "Ingest", "Queue", "Digests", "PhotolalaCore", .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "UploadTests", dependencies: [
            "Upload", "Bucket", "Queue", "Digests", "PhotolalaCore", .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "PreviewsTests", dependencies: ["Previews", "PhotolalaCore"]),
        .testTarget(name: "ThumbnailsTests", dependencies: [
            "Thumbnails", "Previews", "Queue", "Digests", "PhotolalaCore", .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "InventoryTests", dependencies: [
            "Inventory", "Upload", "Queue", "Bucket", "PhotolalaCore", .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "ManifestFormatTests", dependencies: ["ManifestFormat", "PhotolalaCore", "Digests", "Vault"]),
        .testTarget(name: "ManifestTests", dependencies: [
            // Ingest and Upload: the tests' files are seen, hashed and become `uploaded` the
            // way those stages make them.
            "Manifest", "ManifestFormat", "Queue", "Ingest", "Upload", "Bucket", "BucketTesting", "PhotolalaCore", "Digests", "Vault",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "RestoreWireTests", dependencies: ["RestoreWire", "ManifestFormat"]),
        // The relay in-process against the in-memory bucket; the command (`RestoreCtl`) is
        // its client through a real control socket, as photolalactl is.
        .testTarget(name: "RestoreRelayTests", dependencies: [
            "RestoreRelay", "RestoreCtl", "RestoreFiles", "RestoreWire", "ManifestFormat", "Control", "Bucket", "BucketTesting", "PhotolalaCore", "Digests", "Vault",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "RestoreCtlTests", dependencies: [
            "RestoreCtl", "RestoreFiles", "RestoreWire", "ManifestFormat", "Control", "PhotolalaCore", "Digests",
        ]),
        .testTarget(name: "RestoreFilesTests", dependencies: [
            "RestoreFiles", "RestoreWire", "ManifestFormat", "PhotolalaCore", "Digests",
        ]),
        .testTarget(name: "MirrorTests", dependencies: [
            "Mirror", "RestoreFiles", "RestoreRelay", "RestoreWire", "ManifestFormat", "Queue", "Ingest", "Bucket", "BucketTesting", "PhotolalaCore", "Digests",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "VaultTests", dependencies: ["Vault", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "KeysTests", dependencies: [
            "Keys", "Vault", "Bucket", "BucketTesting", "PhotolalaCore", "ManifestFormat", .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "CatalogTests", dependencies: [
            "Catalog", "Queue", "Bucket", "BucketTesting", "Digests", "Account", "PhotolalaCore",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
        ]),
        // Each stage actor in-process on a temporary database against the in-memory bucket.
        .testTarget(name: "StageTests", dependencies: [
            "Upload", "Inventory", "Thumbnails", "Catalog", "Ingest", "Bucket", "BucketTesting", "Queue", "Previews", "Digests",
            "PhotolalaCore", "Mirror", "RestoreFiles", "RestoreRelay", "RestoreWire", "ManifestFormat",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "NotifyTests", dependencies: ["Notify", "PhotolalaCore", "BucketTesting"]),
        .testTarget(name: "WebTests", dependencies: [
            "Web", "Control", "Queue", "Ingest", "Upload", "PhotolalaCore",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "DaemonTests", dependencies: [
            "Daemon", "Queue", "Account", "Ingest", "Upload", "Inventory", "PhotolalaCore", "BucketTesting",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
