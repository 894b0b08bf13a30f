import Foundation
import PhotolalaCore
import Testing
import Config

@Suite struct MirrorSectionTests {
    let base = "[watch]\nfolders = [\"/srv/photos\"]\n[daemon]\nstate_dir = \"/var/lib/photolala\"\n"

    func problems(_ text: String) -> [ConfigError.Problem] {
        do {
            _ = try ConfigLoader.parse(base + text)
            return []
        } catch {
            return error.problems
        }
    }

    @Test func offByDefaultWithMirrorMdsDefaults() throws {
        let m = try ConfigLoader.parse(base).mirror
        #expect(m.folder == nil && m.include == .others && m.onCloudDelete == .keep && m.minFree == .percent(5))
        #expect(m.downloadLimit == nil && !m.thawArchived && m.owner == nil && m.fileMode == 0o640 && m.dirMode == 0o750)
        #expect(m.checkInterval == .seconds(900) && m.listInterval == .seconds(86400))
    }

    @Test func everyKeyIsReadAndPrintedBack() throws {
        let s = try ConfigLoader.parse(base + """
            [mirror]
            folder = "/srv/mirror/"
            include = "all"
            on_cloud_delete = "trash"
            min_free = "20GiB"
            download_limit = "4MiB/s"
            thaw_archived = true
            owner = "root:root"
            file_mode = "0644"
            dir_mode = "2755"
            check_interval = "1m"
            list_interval = "6h"
            """)
        let m = s.mirror
        #expect(m.folder == "/srv/mirror" && m.include == .all && m.onCloudDelete == .trash && m.minFree == .bytes(20 << 30))
        #expect(m.downloadLimit == 4 << 20 && m.thawArchived && m.owner == .init(user: "root", group: "root"))
        #expect(m.fileMode == 0o644 && m.dirMode == 0o2755 && m.checkInterval == .seconds(60) && m.listInterval == .seconds(6 * 3600))
        var again = try ConfigLoader.parse(EffectiveSettings.toml(s))
        again.account.deviceName = s.account.deviceName
        #expect(again == s)
        #expect(try ConfigLoader.parse(base + "[mirror]\nmin_free = \"2.5%\"\nowner = \":root\"\n").mirror.minFree == .percent(2.5))
        #expect(try ConfigLoader.parse(base + "[mirror]\nowner = \":root\"\n").mirror.owner == .init(user: nil, group: "root"))
    }

    @Test func checkConfigRefusesWhatMirrorMdRefuses() {
        func refused(_ folder: String) -> String? {
            problems("[mirror]\nfolder = \"\(folder)\"\n").first { $0.key == "mirror.folder" }?.expected
        }
        #expect(refused("photos/mirror")?.contains("absolute") == true)
        #expect(refused("/")?.contains("below /") == true)
        #expect(refused("/var/lib/photolala")?.contains("state_dir") == true)
        #expect(refused("/var/lib/photolala/mirror")?.contains("state_dir") == true)
        #expect(refused("/var/lib")?.contains("state_dir") == true, "a folder holding the state directory")
        #expect(refused("/srv")?.contains("/srv/photos") == true, "a folder holding a watched folder")
        #expect(refused("/srv/photos")?.contains("/srv/photos") == true, "the watched folder itself")
        #expect(refused("/srv/photos/../etc")?.contains("normalised") == true)
        #expect(refused("/srv/photos/Photolala") == nil, "inside a watched folder is fine")
        #expect(refused("/srv/photos2") == nil, "a name that only starts like a watched folder")
        #expect(problems("[mirror]\nfolder = \"\"\n").isEmpty, "\"\" is off")
    }

    @Test func badValuesNameTheirKeys() {
        let cases: [(String, String)] = [
            ("include = \"some\"", "mirror.include"), ("on_cloud_delete = \"delete\"", "mirror.on_cloud_delete"),
            ("min_free = \"100%\"", "mirror.min_free"), ("min_free = \"lots\"", "mirror.min_free"),
            ("download_limit = \"0\"", "mirror.download_limit"), ("thaw_archived = \"yes\"", "mirror.thaw_archived"),
            ("owner = \"nosuchuser-photolala:root\"", "mirror.owner"), ("owner = \"root:nosuchgroup-photolala\"", "mirror.owner"),
            ("owner = \":\"", "mirror.owner"),
            ("file_mode = 640", "mirror.file_mode"), ("file_mode = \"4755\"", "mirror.file_mode"), ("file_mode = \"0040\"", "mirror.file_mode"),
            ("dir_mode = \"0650\"", "mirror.dir_mode"), ("dir_mode = \"4750\"", "mirror.dir_mode"),
            ("check_interval = \"1s\"", "mirror.check_interval"), ("list_interval = \"10s\"", "mirror.list_interval"),
            ("foldr = \"/x\"", "mirror.foldr"),
        ]
        for (line, key) in cases {
            #expect(problems("[mirror]\n\(line)\n").map(\.key) == [key], "\(line)")
        }
    }
}
