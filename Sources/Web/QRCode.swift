import CQRencode

/// A QR code drawn by libqrencode (the pairing address on the page, web.md `/api/login`),
/// and its SVG: one path of dark runs, a four-module quiet zone, so any phone camera and
/// `zbarimg` read it.
package struct QRCode: Sendable, Equatable {
    /// Modules per side.
    package let width: Int
    /// Row by row, true for dark.
    package let modules: [Bool]

    /// Nil when the text cannot be encoded (too long for a QR code: over about 2 KB).
    package init?(_ text: String) {
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_M) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        self.width = width
        modules = (0..<(width * width)).map { code.pointee.data[$0] & 1 == 1 }
    }

    package func isDark(x: Int, y: Int) -> Bool { modules[y * width + x] }

    /// The code as SVG, scaled by the page; `label` is what a screen reader says.
    package func svg(label: String) -> String {
        let quiet = 4
        let side = width + 2 * quiet
        var path = ""
        for y in 0..<width {
            var x = 0
            while x < width {
                guard isDark(x: x, y: y) else { x += 1; continue }
                let start = x
                while x < width && isDark(x: x, y: y) { x += 1 }
                path += "M\(start + quiet) \(y + quiet)h\(x - start)v1h-\(x - start)z"
            }
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(side) \(side)" width="\(side * 6)" height="\(side * 6)" \
            shape-rendering="crispEdges" role="img" aria-label="\(Self.escape(label))">\
            <rect width="\(side)" height="\(side)" fill="#fff"/><path d="\(path)" fill="#000"/></svg>
            """
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
