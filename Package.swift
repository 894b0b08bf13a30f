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
        // because the TLS target uses them directly.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.1.0"),
        // The account key, the recovery key and the sealed manifest (Vault); the TLS tests
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

        .target(name: "CLinux"),
        // libvips/LibRaw rendering and the seccomp sandbox of the preview worker. The decoders are
        // loaded with dlopen by the worker alone (Sources/CPreviews/decoders.h), never linked:
        // only their headers are used here (libvips-dev, libraw-dev), and vips.h needs GLib's.
        .target(name: "CPreviews", dependencies: ["CSeccomp"], cSettings: [.unsafeFlags(glibHeaders)]),
        .target(name: "CMultiMD5", dependencies: ["COpenSSL"]),

        // The counters' catalog is here so every part counts through swift-metrics' API alone.
        .target(name: "PhotolalaCore", dependencies: [.product(name: "CoreMetrics", package: "swift-metrics")]),
        .target(name: "Config", dependencies: [
            "PhotolalaCore",
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        // MD5, SHA-256, HMAC, hex and the stat → identity rule, for the hasher and the S3 transport alike.
        .target(name: "Digests", dependencies: ["PhotolalaCore", "COpenSSL"]),
        .target(name: "Hashing", dependencies: ["PhotolalaCore", "Digests", "CLinux", "CMultiMD5"]),
        .target(name: "Queue", dependencies: [
            "PhotolalaCore",
            .product(name: "GRDB", package: "GRDB.swift"),
            // The SQLite C API, for the statements a scan runs once per file (RawStatement).
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
        ]),
        .target(name: "Watcher", dependencies: [
            "PhotolalaCore", "CInotifyTools", "CLinux",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The trust (system store + tls.ca_file) both HTTP clients use, and certificate
        // failures told as sentences.
        .target(name: "TLS", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOTLS", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
        ]),
        .target(name: "S3", dependencies: [
            "PhotolalaCore", "Digests", "TLS",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .target(name: "Backend", dependencies: [
            "PhotolalaCore", "TLS", "S3",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .target(name: "Credentials", dependencies: [
            "PhotolalaCore", "Backend", "TLS",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Ingest", dependencies: [
            "PhotolalaCore", "Queue", "Digests", "Hashing", "Watcher", "CLinux",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Upload", dependencies: [
            "PhotolalaCore", "Queue", "S3", "Digests", "Hashing", "Backend", "Credentials", "TLS",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
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
            "PhotolalaCore", "Queue", "S3", "Digests", "Credentials", "Previews", "Upload", "TLS",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The device manifest: its format and replay, and the stage that writes it.
        .target(name: "Manifest", dependencies: [
            "PhotolalaCore", "Queue", "S3", "Digests", "Backend", "Credentials", "Upload", "TLS", "CLinux",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Inventory", dependencies: [
            "PhotolalaCore", "Queue", "S3", "Digests", "Backend", "Credentials", "TLS",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The apps' catalog: merge our ready photos into the user's catalog and publish it (app-catalog.md).
        .target(name: "Catalog", dependencies: [
            "PhotolalaCore", "Queue", "S3", "Digests", "Backend", "TLS",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Control", dependencies: [
            "PhotolalaCore",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // Prometheus: the status snapshot and the parts' counters as text, on the socket and over TCP.
        .target(name: "MetricsExport", dependencies: [
            "PhotolalaCore",
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
        .target(name: "Vault", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // Restoring: the daemon's network side and the command's plan and file writing.
        .target(name: "Restore", dependencies: [
            "PhotolalaCore", "Manifest", "Control", "S3", "Digests", "Backend", "Credentials", "Upload", "TLS", "CLinux",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .target(name: "Daemon", dependencies: [
            "PhotolalaCore", "Config", "Queue", "Control", "Hashing", "Credentials", "Upload", "Ingest", "Inventory", "Thumbnails", "Catalog", "MetricsExport", "CSystemd", "CLinux",
            "Manifest", "Restore",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
        .target(name: "CLI", dependencies: [
            "PhotolalaCore", "Config", "Control", "Daemon", "Previews", "Manifest", "Restore", "Digests",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "photolalad", dependencies: ["CLI"]),

        .testTarget(name: "ConfigTests", dependencies: ["Config"]),
        .testTarget(name: "PhotolalaCoreTests", dependencies: [
            "PhotolalaCore", .product(name: "MetricsTestKit", package: "swift-metrics"),
        ]),
        .testTarget(name: "MetricsExportTests", dependencies: [
            "MetricsExport", "PhotolalaCore", .product(name: "CoreMetrics", package: "swift-metrics"),
        ]),
        .testTarget(name: "DigestsTests", dependencies: ["Digests", "PhotolalaCore"]),
        .testTarget(name: "HashingTests", dependencies: ["Hashing", "Digests", "CMultiMD5"]),
        .testTarget(name: "QueueTests", dependencies: ["Queue", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "WatcherTests", dependencies: [
            "Watcher", "PhotolalaCore", .product(name: "MetricsTestKit", package: "swift-metrics"),
        ]),
        .testTarget(name: "TLSTests", dependencies: [
            "TLS",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "S3Tests", dependencies: [
            "S3", "Digests", "PhotolalaCore", .product(name: "MetricsTestKit", package: "swift-metrics"),
        ]),
        .testTarget(name: "ControlTests", dependencies: [
            "Control",
            .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
        ]),
        .testTarget(name: "CredentialsTests", dependencies: ["Credentials"]),
        .testTarget(name: "BackendTests", dependencies: ["Backend", "PhotolalaCore"]),
        .testTarget(name: "CLITests", dependencies: [
            "CLI", "Control", "PhotolalaCore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .testTarget(name: "IngestTests", dependencies: ["Ingest", "PhotolalaCore"]),
        .testTarget(name: "UploadTests", dependencies: ["Upload", "S3", "Queue", "Digests", "PhotolalaCore"]),
        .testTarget(name: "PreviewsTests", dependencies: ["Previews", "PhotolalaCore"]),
        .testTarget(name: "ThumbnailsTests", dependencies: ["Thumbnails", "Previews", "Queue", "Digests", "PhotolalaCore"]),
        .testTarget(name: "InventoryTests", dependencies: ["Inventory", "Queue", "S3", "PhotolalaCore"]),
        .testTarget(name: "ManifestTests", dependencies: ["Manifest", "Queue", "PhotolalaCore", "Digests"]),
        .testTarget(name: "RestoreTests", dependencies: ["Restore", "Manifest", "Control", "PhotolalaCore", "Digests"]),
        .testTarget(name: "VaultTests", dependencies: ["Vault", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "CatalogTests", dependencies: [
            "Catalog", "Queue", "S3", "Digests", "Backend", "Credentials", "PhotolalaCore",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
        ]),
        .testTarget(name: "DaemonTests", dependencies: [
            "Daemon", "Queue", "Credentials", "Ingest", "Upload", "Inventory", "PhotolalaCore",
            .product(name: "Logging", package: "swift-log"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
