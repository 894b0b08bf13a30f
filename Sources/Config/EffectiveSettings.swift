import PhotolalaCore

/// Renders settings back as TOML for `--check-config`: every key with its effective
/// value, defaults included, so what the daemon will do is visible at a glance.
package enum EffectiveSettings {
    package static func toml(_ s: Settings) -> String {
        func q(_ v: String) -> String {
            "\"" + v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        func list(_ v: [String]) -> String { "[" + v.map(q).joined(separator: ", ") + "]" }
        var lines: [String] = []
        lines.append("[account]")
        lines.append("api_url = \(q(s.account.apiURL))")
        lines.append("device_name = \(q(s.account.deviceName ?? HostName.current()))")
        lines.append("")
        lines.append("[watch]")
        lines.append("folders = \(list(s.watch.folders))")
        lines.append("extensions = \(list(s.watch.extensions))")
        lines.append("exclude = \(list(s.watch.exclude))")
        lines.append("settle = \(q(Units.format(s.watch.settle)))")
        lines.append("rescan_interval = \(q(s.watch.rescanInterval.map(Units.format) ?? "off"))")
        lines.append("follow_symlinks = \(s.watch.followSymlinks)")
        lines.append("")
        lines.append("[upload]")
        lines.append("concurrency = \(s.upload.concurrency)")
        lines.append("multipart_threshold = \(q(Units.formatSize(s.upload.multipartThreshold)))")
        lines.append("part_size = \(q(Units.formatSize(s.upload.partSize)))")
        lines.append("bandwidth_limit = \(q(s.upload.bandwidthTimetable?.description ?? s.upload.bandwidthLimit.map { Units.formatSize($0) + "/s" } ?? "off"))")
        lines.append("storage_class = \(q(s.upload.storageClass))")
        lines.append("inventory_interval = \(q(Units.format(s.upload.inventoryInterval)))")
        lines.append("")
        lines.append("[catalog]")
        lines.append("enabled = \(s.catalog.enabled)")
        lines.append("publish_interval = \(q(Units.format(s.catalog.publishInterval)))")
        lines.append("check_interval = \(q(Units.format(s.catalog.checkInterval)))")
        lines.append("")
        lines.append("[notify]")
        lines.append("webhook = \(q(s.notify.webhook ?? ""))")
        lines.append("webhook_format = \(q(s.notify.webhookFormat.rawValue))")
        lines.append("command = \(q(s.notify.command ?? ""))")
        lines.append("healthcheck_url = \(q(s.notify.healthcheckURL ?? ""))")
        lines.append("healthcheck_interval = \(q(Units.format(s.notify.healthcheckInterval)))")
        lines.append("repeat = \(q(Units.format(s.notify.repeatInterval)))")
        lines.append("daily_summary = \(s.notify.dailySummary)")
        lines.append("")
        lines.append("[audit]")
        lines.append("max_size = \(q(Units.formatSize(s.audit.maxSize)))")
        lines.append("")
        lines.append("[tls]")
        lines.append("ca_file = \(q(s.tls.caFile ?? ""))")
        lines.append("")
        lines.append("[metrics]")
        lines.append("listen = \(q(s.metrics.listen?.description ?? "off"))")
        lines.append("")
        lines.append("[web]")
        lines.append("listen = \(q(s.web.listen?.description ?? "off"))")
        lines.append("hosts = \(list(s.web.hosts))")
        lines.append("tls_cert = \(q(s.web.tlsCert ?? ""))")
        lines.append("tls_key = \(q(s.web.tlsKey ?? ""))")
        lines.append("allow_plain_http = \(s.web.allowPlainHTTP)")
        lines.append("session_ttl = \(q(Units.format(s.web.sessionTTL)))")
        lines.append("")
        lines.append("[credentials]")
        lines.append("refresh_before_expiry = \(q(Units.format(s.credentials.refreshBeforeExpiry)))")
        lines.append("apple_check_interval = \(q(Units.format(s.credentials.appleCheckInterval)))")
        lines.append("")
        lines.append("[daemon]")
        lines.append("state_dir = \(q(s.daemon.stateDir))")
        lines.append("socket = \(q(s.daemon.socket))")
        lines.append("socket_group = \(q(s.daemon.socketGroup))")
        lines.append("log_level = \(q(s.daemon.logLevel.rawValue))")
        return lines.joined(separator: "\n") + "\n"
    }
}
