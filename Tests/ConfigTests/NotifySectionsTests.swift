import Foundation
import PhotolalaCore
import Testing
import Config

/// `[notify]`, `[audit]` and `upload.bandwidth_limit` as a timetable (config.md).
@Suite struct NotifySectionsTests {
    let folders = "[watch]\nfolders = [\"/srv/photos\"]\n"

    func problems(_ text: String) -> [ConfigError.Problem] {
        do {
            _ = try ConfigLoader.parse(folders + text)
            return []
        } catch {
            return error.problems
        }
    }

    @Test func theDefaultsAreConfigMds() throws {
        let s = try ConfigLoader.parse(folders)
        #expect(s.notify == Settings.Notify())
        #expect(s.notify.webhook == nil && s.notify.command == nil && s.notify.healthcheckURL == nil && !s.notify.hasChannels)
        #expect(s.notify.webhookFormat == .json)
        #expect(s.notify.healthcheckInterval == .seconds(3600))
        #expect(s.notify.repeatInterval == .seconds(86400))
        #expect(!s.notify.dailySummary)
        #expect(s.audit.maxSize == 8 << 20)
        #expect(s.upload.bandwidthTimetable == nil && s.upload.bandwidthLimit == nil)
    }

    @Test func everyKeyIsRead() throws {
        let s = try ConfigLoader.parse(folders + """
            [notify]
            webhook = "https://ntfy.sh/my-nas"
            webhook_format = "ntfy"
            command = "/bin/true"
            healthcheck_url = "http://127.0.0.1:8000/ping/abc"
            healthcheck_interval = "5m"
            repeat = "3s"
            daily_summary = true
            [audit]
            max_size = "1MiB"
            """)
        #expect(s.notify.webhook == "https://ntfy.sh/my-nas" && s.notify.webhookFormat == .ntfy)
        #expect(s.notify.command == "/bin/true")
        #expect(s.notify.healthcheckURL == "http://127.0.0.1:8000/ping/abc")
        #expect(s.notify.healthcheckInterval == .seconds(300) && s.notify.repeatInterval == .seconds(3))
        #expect(s.notify.dailySummary && s.notify.hasChannels)
        #expect(s.audit.maxSize == 1 << 20)
        let printed = EffectiveSettings.toml(s)
        for line in ["[notify]", "webhook = \"https://ntfy.sh/my-nas\"", "webhook_format = \"ntfy\"", "command = \"/bin/true\"",
                     "healthcheck_interval = \"5m\"", "repeat = \"3s\"", "daily_summary = true", "[audit]", "max_size = \"1MiB\""] {
            #expect(printed.contains(line + "\n"), "\(line)")
        }
        // What --check-config prints reads back as the same settings.
        #expect(try ConfigLoader.parse(printed.replacingOccurrences(of: "device_name = \"\(HostName.current())\"\n", with: "")) == s)
    }

    @Test func emptyStringsMeanNone() throws {
        let s = try ConfigLoader.parse(folders + "[notify]\nwebhook = \"\"\ncommand = \"\"\nhealthcheck_url = \"\"\n")
        #expect(!s.notify.hasChannels)
    }

    @Test(arguments: [
        ("[notify]\nwebhook = \"http://ntfy.example/topic\"\n", "notify.webhook", "loopback"),
        ("[notify]\nwebhook = \"ftp://127.0.0.1/x\"\n", "notify.webhook", "https://"),
        ("[notify]\nwebhook = \"ntfy.sh/topic\"\n", "notify.webhook", "absolute URL"),
        ("[notify]\nhealthcheck_url = \"http://10.0.0.2/ping\"\n", "notify.healthcheck_url", "loopback"),
        ("[notify]\nwebhook_format = \"discord\"\n", "notify.webhook_format", "json, ntfy, slack"),
        ("[notify]\ncommand = \"notify.sh\"\n", "notify.command", "absolute path"),
        ("[notify]\ncommand = \"/nonexistent/notify.sh\"\n", "notify.command", "executable file"),
        ("[notify]\ncommand = \"/tmp\"\n", "notify.command", "not a directory"),
        ("[notify]\nhealthcheck_interval = \"2d\"\n", "notify.healthcheck_interval", "1s to 1d"),
        ("[notify]\nrepeat = 0\n", "notify.repeat", "1s to 30d"),
        ("[notify]\nrepeat = \"31d\"\n", "notify.repeat", "1s to 30d"),
        ("[notify]\ndaily_summary = \"yes\"\n", "notify.daily_summary", "true or false"),
        ("[notify]\nwebhok = \"https://x\"\n", "notify.webhok", "unknown key"),
        ("[audit]\nmax_size = \"1KiB\"\n", "audit.max_size", "64KiB to 1GiB"),
        ("[audit]\nmax_size = \"big\"\n", "audit.max_size", "size"),
    ])
    func aBadValueIsNamed(text: String, key: String, word: String) {
        let found = problems(text)
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.key == key)
        #expect(found.first?.description.contains(word) == true, "\(found.first?.description ?? "")")
    }

    @Test func bandwidthIsARateOrATimetable() throws {
        let rate = try ConfigLoader.parse(folders + "[upload]\nbandwidth_limit = \"10MiB/s\"\n")
        #expect(rate.upload.bandwidthLimit == 10 << 20 && rate.upload.bandwidthTimetable == nil)
        let table = try ConfigLoader.parse(folders + "[upload]\nbandwidth_limit = \"08:00,2MiB/s 18:00,0 23:00,off\"\n")
        #expect(table.upload.bandwidthLimit == nil)
        #expect(table.upload.bandwidthTimetable?.description == "08:00,2MiB/s 18:00,0 23:00,off")
        #expect(EffectiveSettings.toml(table).contains("bandwidth_limit = \"08:00,2MiB/s 18:00,0 23:00,off\"\n"))
        let weekly = try ConfigLoader.parse(folders + "[upload]\nbandwidth_limit = \"Mon-08:00,1MiB/s Sat-00:00,off\"\n")
        #expect(weekly.upload.bandwidthTimetable?.isWeekly == true)
    }

    @Test func aMalformedTimetableNamesTheEntryAndWhatWasExpected() {
        let found = problems("[upload]\nbandwidth_limit = \"08:00,2MiB/s 25:00,0 23:00,off\"\n")
        #expect(found.map(\.key) == ["upload.bandwidth_limit"])
        let text = found.first?.description ?? ""
        #expect(text.contains("in the entry \"25:00,0\": a time of day HH:MM from 00:00 to 23:59"), "\(text)")
        let mixed = problems("[upload]\nbandwidth_limit = \"Mon-08:00,off 18:00,0\"\n").first?.description ?? ""
        #expect(mixed.contains("\"18:00,0\"") && mixed.contains("not mixed"), "\(mixed)")
    }

    @Test func zeroAloneIsNotARate() {
        let text = problems("[upload]\nbandwidth_limit = \"0\"\n").first?.description ?? ""
        #expect(text.contains("0 pauses only within a timetable") && text.contains("photolalactl pause"), "\(text)")
    }
}
