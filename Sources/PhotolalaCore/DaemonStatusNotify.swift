// The notification channels and the upload rate the bandwidth timetable puts
// in force
extension DaemonStatus {
    package struct Notify: Codable, Sendable, Equatable {
        /// One channel's deliveries.
        package struct Channel: Codable, Sendable, Equatable {
            /// `webhook`, `command` or `healthcheck`.
            package var channel: String
            @Null package var lastSentAt: String?
            /// Why its last attempt failed; null once one succeeds.
            @Null package var lastError: String?
            /// Events waiting to be sent again.
            package var pending: Int
            package var sent: Int
            /// Events given up on after a day of retries.
            package var dropped: Int

            package init(channel: String, lastSentAt: String? = nil, lastError: String? = nil, pending: Int = 0, sent: Int = 0,
                        dropped: Int = 0) {
                self.channel = channel
                self.lastSentAt = lastSentAt
                self.lastError = lastError
                self.pending = pending
                self.sent = sent
                self.dropped = dropped
            }
        }

        /// The configured channels (`webhook`, `command`, `healthcheck`).
        package var channels: [String]
        /// When a channel last took an event (the latest of all channels).
        @Null package var lastSentAt: String?
        /// The last failure of a channel still failing, named (`webhook: HTTP 500 from ntfy.sh`).
        @Null package var lastError: String?
        package var perChannel: [Channel]

        package init(channels: [String] = [], lastSentAt: String? = nil, lastError: String? = nil, perChannel: [Channel] = []) {
            self.channels = channels
            self.lastSentAt = lastSentAt
            self.lastError = lastError
            self.perChannel = perChannel
        }
    }

    package struct Bandwidth: Codable, Sendable, Equatable {
        /// Bytes per second uploads may use now: null is no limit, 0 while the timetable pauses.
        @Null package var limit: Int64?
        /// The timetable as in force (`"08:00,2MiB/s 18:00,0 23:00,off"`); null for one rate.
        @Null package var timetable: String?
        /// When the timetable's current slot ends; null without a timetable.
        @Null package var until: String?
        /// The limit from `until` on.
        @Null package var nextLimit: Int64?

        package init(limit: Int64? = nil, timetable: String? = nil, until: String? = nil, nextLimit: Int64? = nil) {
            self.limit = limit
            self.timetable = timetable
            self.until = until
            self.nextLimit = nextLimit
        }
    }
}

/// `photolalactl notify --test`: what each configured channel answered to a test event.
package struct NotifyTestReport: Codable, Sendable, Equatable {
    package struct Result: Codable, Sendable, Equatable {
        package var channel: String
        package var ok: Bool
        /// The receiver's answer (`HTTP 200 from ntfy.sh`, `exit 0: sent`) or why there was none.
        package var answer: String
        package init(channel: String, ok: Bool, answer: String) {
            self.channel = channel
            self.ok = ok
            self.answer = answer
        }
    }

    package var results: [Result]
    package init(results: [Result]) {
        self.results = results
    }
}
