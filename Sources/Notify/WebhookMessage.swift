import Foundation
import PhotolalaCore

/// An event as one webhook request, in the configured format (config.md `webhook_format`):
/// `json` the event object; `ntfy` the message as a text body with Title, Priority and
/// Tags headers; `slack` `{"text": …}` (also Discord's /slack and Mattermost).
package struct WebhookMessage: Sendable, Equatable {
    package struct Header: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    package var headers: [Header]
    package var body: [UInt8]

    package static func make(_ event: NotifyEvent, format: Settings.Notify.WebhookFormat) -> WebhookMessage {
        switch format {
        case .json:
            return WebhookMessage(headers: [Header(name: "Content-Type", value: "application/json")], body: json(event))
        case .ntfy:
            return WebhookMessage(headers: [
                Header(name: "Content-Type", value: "text/plain; charset=utf-8"),
                Header(name: "Title", value: headerValue(event.title)),
                Header(name: "Priority", value: "\(ntfyPriority(event))"),
                Header(name: "Tags", value: ntfyTags(event).joined(separator: ",")),
            ], body: Array(event.message.utf8))
        case .slack:
            let text = "*\(event.title)*\n\(event.message)"
            let body = (try? JSONSerialization.data(withJSONObject: ["text": text], options: [.withoutEscapingSlashes])) ?? Data()
            return WebhookMessage(headers: [Header(name: "Content-Type", value: "application/json")], body: Array(body))
        }
    }

    static func json(_ event: NotifyEvent) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? Array(encoder.encode(event))) ?? Array("{}".utf8)
    }

    /// ntfy's 1 (min) … 5 (max): a stopped backup is "high", not the alarm-clock "max".
    static func ntfyPriority(_ event: NotifyEvent) -> Int {
        switch (event.event, event.severity) {
        case (.problem, .critical): 4
        case (.summary, _): 2
        default: 3
        }
    }

    /// Emoji short codes ntfy shows, then the reason for filtering.
    static func ntfyTags(_ event: NotifyEvent) -> [String] {
        let emoji = switch (event.event, event.severity) {
        case (.problem, .critical): "rotating_light"
        case (.problem, _): "warning"
        case (.recovered, _): "white_check_mark"
        case (.summary, _): "floppy_disk"
        case (.test, _): "test_tube"
        }
        return [emoji, "photolala"] + (event.reason.map { [$0] } ?? [])
    }

    /// A header value on one line, in ASCII: anything else as an RFC 2047 encoded word
    /// (ntfy decodes those), so a device name with accents survives.
    package static func headerValue(_ text: String) -> String {
        let line = text.replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
        if line.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0.value != 0x7F }) { return line }
        return "=?UTF-8?B?" + Data(line.utf8).base64EncodedString() + "?="
    }
}
