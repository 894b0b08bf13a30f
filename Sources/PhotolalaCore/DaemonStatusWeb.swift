extension DaemonStatus {
    /// The status page (web.md): where it is served, how, and why not.
    package struct Web: Codable, Sendable, Equatable {
        /// `[web] listen` as configured; null when it is "off".
        @Null package var listen: String?
        /// The page's address while it is served (`https://…` with TLS); null otherwise.
        @Null package var url: String?
        package var tls: Bool
        /// Served over plain HTTP beyond loopback because `allow_plain_http = true`:
        /// anyone on the network path can read the page and the session cookie.
        package var plainHTTPBeyondLoopback: Bool
        /// Why `listen` is not served (the address and why); tried again every minute.
        @Null package var lastError: String?
        /// `listen` was written in the config: then a failure needs the user.
        package var listenSet: Bool
        /// Sessions open now (from `photolalactl web --link`).
        package var sessions: Int

        package init(listen: String? = nil, url: String? = nil, tls: Bool = false, plainHTTPBeyondLoopback: Bool = false,
                     lastError: String? = nil, listenSet: Bool = false, sessions: Int = 0) {
            self.listen = listen
            self.url = url
            self.tls = tls
            self.plainHTTPBeyondLoopback = plainHTTPBeyondLoopback
            self.lastError = lastError
            self.listenSet = listenSet
            self.sessions = sessions
        }
    }
}
