import Backend
import Bucket
import Logging
import PhotolalaCore

extension AccountService {
    /// What the account service takes from the settings: the one mapping, used at start
    /// and on reload.
    package struct Options: Sendable, Equatable {
        package var apiURL: String
        /// Resolved when used, so a renamed NAS shows its new name.
        package var deviceName: String
        package var refreshBeforeExpiry: Duration
        package var appleCheckInterval: Duration
        /// The system's CA store plus `tls.ca_file`, read now (so a reload re-reads it).
        package var trust: TLSTrust

        package init(_ settings: Settings) {
            apiURL = settings.account.apiURL
            deviceName = settings.account.deviceName ?? HostName.current()
            refreshBeforeExpiry = settings.credentials.refreshBeforeExpiry
            appleCheckInterval = settings.credentials.appleCheckInterval
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    package init(stateDir: String, options: Options, logger: Logger, statusChanges: ChangeFeed = ChangeFeed()) {
        self.init(stateDir: stateDir, backend: BackendClient(baseURL: options.apiURL, trust: options.trust, logger: logger), deviceName: options.deviceName,
                  refreshBeforeExpiry: options.refreshBeforeExpiry, appleCheckInterval: options.appleCheckInterval, logger: logger,
                  statusChanges: statusChanges)
    }

    /// New settings on reload: a new backend client, device name and timings.
    package func reconfigure(_ options: Options) {
        reconfigure(backend: BackendClient(baseURL: options.apiURL, trust: options.trust, logger: logger), deviceName: options.deviceName,
                    refreshBeforeExpiry: options.refreshBeforeExpiry, appleCheckInterval: options.appleCheckInterval)
    }
}
