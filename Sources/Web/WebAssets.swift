/// The page's files, compiled into the binary (`.embedInCode` in Package.swift): nothing
/// is read from disk or fetched from another origin to show it.
enum WebAssets {
    static let page = PackageResources.index_html
    static let script = PackageResources.app_js
    static let style = PackageResources.app_css
    static let icon = PackageResources.favicon_svg

    /// `/session` with a link that is unknown, used or expired.
    static let linkRefused = Array("""
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Link not valid — photolalad</title>
        <link rel="stylesheet" href="/app.css"></head><body><main class="refused"><h1>This link does not open a session</h1>
        <p>A link from <code>photolalactl web --link</code> works once, within 10 minutes. This one was already used, has
        expired, or was ended by <code>photolalactl web --revoke</code>.</p>
        <p>On the NAS, run <code>sudo photolalactl web --link</code> and open the new link it prints.</p>
        <p><a href="/">See the backup's status without a session</a></p></main></body></html>
        """.utf8)
}
